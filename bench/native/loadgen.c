// A load generator in C for the benchmark's two latency figures whose targets sit near the
// machine's floor: the paced GET p99 and the long-poll's last answer. The Node
// generators (bench/lib/paced.ts, bench/lib/hold-child.ts) spend tens of microseconds of their
// own per request and pace to the event loop's timer (~1 ms); on a two-core machine their own
// lateness was most of a bare server's measured p99. This one paces with an absolute timerfd
// (timer slack 1 ns), reads answers with epoll, and parses only what framing needs.
//
// Built by bench/lib/native.ts with the machine's C compiler into a folder that is not committed.
//
//   loadgen paced <host> <port> <rate> <seconds> <warmup-seconds> <connections> <requests-file>
//   loadgen hold  <host> <port> <count> <requests-file>
//   loadgen jitter <seconds>
//
// <requests-file>: requests as [u32 little-endian length][bytes], used in turn (request k is
// k mod their number). Prints one JSON object on stdout; `hold` first prints a line `connected`
// once every request is written.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

typedef struct { char *bytes; uint32_t length; } request_t;

typedef struct {
  int fd;
  char *buffer;
  size_t used, capacity;
  long k;          // the request in flight, -1 when idle
  double sent_ns;  // when it was written
  double due_ns;   // when it was due
  int closed;      // the server closed it (or it failed): reopened before its next request
  int chunked;     // the answer just read is chunked (its body still framed)
} connection_t;

static void die(const char *what) { perror(what); exit(2); }

static double now_ns(clockid_t clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static request_t *read_requests(const char *path, long *count) {
  FILE *file = fopen(path, "rb");
  if (!file) die(path);
  long capacity = 16, n = 0;
  request_t *requests = malloc(sizeof(request_t) * capacity);
  uint8_t header[4];
  while (fread(header, 1, 4, file) == 4) {
    uint32_t length = header[0] | header[1] << 8 | header[2] << 16 | (uint32_t)header[3] << 24;
    if (n == capacity) requests = realloc(requests, sizeof(request_t) * (capacity *= 2));
    requests[n].bytes = malloc(length);
    requests[n].length = length;
    if (fread(requests[n].bytes, 1, length, file) != length) die("short requests file");
    n += 1;
  }
  fclose(file);
  if (n == 0) { fprintf(stderr, "no requests in %s\n", path); exit(2); }
  *count = n;
  return requests;
}

static int open_connection(const char *host, int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) die("socket");
  struct sockaddr_in address = { .sin_family = AF_INET, .sin_port = htons(port) };
  if (inet_pton(AF_INET, host, &address.sin_addr) != 1) { fprintf(stderr, "not an IPv4 address: %s\n", host); exit(2); }
  if (connect(fd, (struct sockaddr *)&address, sizeof address) < 0) die("connect");
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

// A connection just opened (blocking until it is written to and primed), its read buffer, nothing in flight.
static void connection_init(connection_t *c, const char *host, int port) {
  c->fd = open_connection(host, port);
  c->capacity = 16384;
  c->buffer = malloc(c->capacity);
  c->k = -1;
}

// Writes the whole request; answers -1 when the connection is gone (the server closed it: EPIPE,
// ECONNRESET), which SIGPIPE, ignored in main, would otherwise have ended the process for.
static int write_all(int fd, const char *bytes, size_t length) {
  while (length > 0) {
    ssize_t written = write(fd, bytes, length);
    if (written < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      if (errno == EPIPE || errno == ECONNRESET) return -1;
      die("write");
    }
    bytes += written;
    length -= (size_t)written;
  }
  return 0;
}

// Where the first whole answer in buf ends, or 0 if it is not all there; its status in *status
// and its body's bounds in *body / *body_length (chunked framing is left in the body: *chunked says so).
static size_t answer_end(const char *buf, size_t used, int *status, const char **body, size_t *body_length, int *is_chunked) {
  const char *header_end = memmem(buf, used, "\r\n\r\n", 4);
  if (!header_end) return 0;
  size_t body_start = (size_t)(header_end - buf) + 4;
  *status = used > 12 ? atoi(buf + 9) : 0;
  long content_length = -1;
  int chunked = 0;
  for (const char *line = memmem(buf, used, "\r\n", 2); line && line < header_end; line = memmem(line + 2, (size_t)(header_end - line), "\r\n", 2)) {
    const char *name = line + 2;
    if (strncasecmp(name, "content-length:", 15) == 0) content_length = atol(name + 15);
    else if (strncasecmp(name, "transfer-encoding:", 18) == 0 && memmem(name, (size_t)(header_end - name), "chunked", 7)) chunked = 1;
  }
  *body = buf + body_start;
  *is_chunked = chunked;
  if (chunked) {
    // Walks the chunks by their sizes (a body may well contain "0\r\n\r\n"); no trailers expected.
    size_t at = body_start;
    for (;;) {
      const char *line_end = memmem(buf + at, used - at, "\r\n", 2);
      if (!line_end) return 0;
      size_t size = strtoul(buf + at, NULL, 16);
      at = (size_t)(line_end - buf) + 2;
      if (size == 0) {
        if (used < at + 2) return 0;
        *body_length = at - body_start;  // the framing is left in the body
        return at + 2;
      }
      at += size + 2;
      if (at > used) return 0;
    }
  }
  if (content_length < 0) content_length = 0;  // 204, 304
  if (used < body_start + (size_t)content_length) return 0;
  *body_length = (size_t)content_length;
  return body_start + (size_t)content_length;
}

// Reads what the socket has; answers 1 (its status and body set) when a whole answer is buffered,
// 0 when not yet. A connection the server closed (or that failed) is marked `closed`: an answer it
// sent before closing is still answered first.
static int read_answer(connection_t *c, int *status, const char **body, size_t *body_length, size_t *end) {
  for (;;) {
    if (c->capacity - c->used < 4096) c->buffer = realloc(c->buffer, c->capacity *= 2);
    ssize_t got = read(c->fd, c->buffer + c->used, c->capacity - c->used);
    if (got > 0) { c->used += (size_t)got; continue; }
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && errno == EAGAIN) break;
    c->closed = 1;
    break;
  }
  *end = answer_end(c->buffer, c->used, status, body, body_length, &c->chunked);
  return *end > 0;
}

static void consume(connection_t *c, size_t end) {
  memmove(c->buffer, c->buffer + end, c->used - end);
  c->used -= end;
}

static void set_nonblocking(int fd) {
  if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) die("nonblocking");
}

static void reopen(int epoll, connection_t *c, int i, const char *host, int port) {
  epoll_ctl(epoll, EPOLL_CTL_DEL, c->fd, NULL);
  close(c->fd);
  c->fd = open_connection(host, port);
  set_nonblocking(c->fd);
  struct epoll_event event = { .events = EPOLLIN, .data.u32 = (uint32_t)i };
  if (epoll_ctl(epoll, EPOLL_CTL_ADD, c->fd, &event) < 0) die("epoll_ctl");
  c->used = 0;
  c->closed = 0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double quantile(double *sorted, long n, double q) {
  if (n == 0) return -1;
  long i = (long)(q * (double)n);
  return sorted[i < n ? i : n - 1];
}

static int paced(const char *host, int port, double rate, double seconds, double warmup_seconds, int connections, request_t *requests, long request_count) {
  long measured = (long)(rate * seconds + 0.5), warmup = (long)(rate * warmup_seconds + 0.5);
  if (measured < 1) measured = 1;
  long total = warmup + measured;
  double *latency = calloc((size_t)total, sizeof(double)), *from_send = calloc((size_t)total, sizeof(double)), *late = calloc((size_t)total, sizeof(double));
  char *ok = calloc((size_t)total, 1);
  long *backlog = malloc(sizeof(long) * (size_t)total);
  double *backlog_due = malloc(sizeof(double) * (size_t)total);
  long backlog_head = 0, backlog_tail = 0;
  connection_t *conns = calloc((size_t)connections, sizeof(connection_t));
  int *idle = malloc(sizeof(int) * (size_t)connections), idle_count = 0;
  int epoll = epoll_create1(0);

  // Connect and send one request on each before the clock starts (the first requests must not pay for connects).
  for (int i = 0; i < connections; i++) {
    connection_t *c = &conns[i];
    connection_init(c, host, port);
    request_t *r = &requests[(total + i) % request_count];
    if (write_all(c->fd, r->bytes, r->length) < 0) die("priming write");
  }
  for (int i = 0; i < connections; i++) {
    connection_t *c = &conns[i];
    int status; const char *body; size_t body_length, end;
    for (;;) {
      ssize_t got = read(c->fd, c->buffer + c->used, c->capacity - c->used);
      if (got <= 0) die("priming read");
      c->used += (size_t)got;
      if ((end = answer_end(c->buffer, c->used, &status, &body, &body_length, &c->chunked)) > 0) break;
    }
    consume(c, end);
    set_nonblocking(c->fd);
    struct epoll_event event = { .events = EPOLLIN, .data.u32 = (uint32_t)i };
    if (epoll_ctl(epoll, EPOLL_CTL_ADD, c->fd, &event) < 0) die("epoll_ctl");
    idle[idle_count++] = i;
  }

  prctl(PR_SET_TIMERSLACK, 1UL);
  int timer = timerfd_create(CLOCK_MONOTONIC, 0);
  struct epoll_event timer_event = { .events = EPOLLIN, .data.u32 = UINT32_MAX };
  epoll_ctl(epoll, EPOLL_CTL_ADD, timer, &timer_event);

  double interval = 1e9 / rate;
  double start = now_ns(CLOCK_MONOTONIC) + 5e6;
  double measured_start = start + (double)warmup * interval;
  long next = 0, answered = 0, failures = 0, reconnects = 0;
  double last_answer = 0, longest_silence = 0, longest_silence_at = 0, send_ended = 0;

  // Sends request k on connection i; a connection the server closed while it sat idle (and whose
  // close this loop has not read yet) is reopened and the request sent again on the new one.
#define SEND(i, k_, due_) do { connection_t *c_ = &conns[i]; request_t *r_ = &requests[(k_) % request_count]; \
    c_->k = (k_); c_->due_ns = (due_); c_->sent_ns = now_ns(CLOCK_MONOTONIC); \
    if (write_all(c_->fd, r_->bytes, r_->length) < 0) { reopen(epoll, c_, (i), host, port); reconnects += 1; \
      if (write_all(c_->fd, r_->bytes, r_->length) < 0) die("write after reopening"); } } while (0)

  struct itimerspec arm = { 0 };
  arm.it_value.tv_sec = (time_t)(start / 1e9);
  arm.it_value.tv_nsec = (long)(start - (double)arm.it_value.tv_sec * 1e9);
  timerfd_settime(timer, TFD_TIMER_ABSTIME, &arm, NULL);

  struct epoll_event events[256];
  while (answered < total) {
    int n = epoll_wait(epoll, events, 256, -1);
    if (n < 0) { if (errno == EINTR) continue; die("epoll_wait"); }
    for (int e = 0; e < n; e++) {
      if (events[e].data.u32 == UINT32_MAX) {
        uint64_t expirations;
        if (read(timer, &expirations, sizeof expirations) < 0 && errno != EAGAIN) die("timerfd read");
        double now = now_ns(CLOCK_MONOTONIC);
        while (next < total) {
          double due = start + (double)next * interval;
          if (due > now) break;
          late[next] = now - due;
          if (idle_count > 0) SEND(idle[--idle_count], next, due);
          else { backlog[backlog_tail] = next; backlog_due[backlog_tail++] = due; }
          next += 1;
        }
        if (next < total) {
          double due = start + (double)next * interval;
          arm.it_value.tv_sec = (time_t)(due / 1e9);
          arm.it_value.tv_nsec = (long)(due - (double)arm.it_value.tv_sec * 1e9);
          timerfd_settime(timer, TFD_TIMER_ABSTIME, &arm, NULL);
        } else if (send_ended == 0) send_ended = now_ns(CLOCK_MONOTONIC);
        continue;
      }
      int i = (int)events[e].data.u32;
      connection_t *c = &conns[i];
      int status = 0; const char *body; size_t body_length, end = 0;
      int whole = read_answer(c, &status, &body, &body_length, &end);
      if (!whole && !c->closed) continue;
      if (c->k < 0 && !whole) {
        // An idle connection the server closed (its keep-alive timeout): reopened, nothing lost.
        reopen(epoll, c, i, host, port);
        reconnects += 1;
        continue;
      }
      if (c->k < 0) { fprintf(stderr, "loadgen: connection %d answered with nothing asked: %.*s\n", i, (int)(c->used < 200 ? c->used : 200), c->buffer); exit(3); }
      double at = now_ns(CLOCK_MONOTONIC);
      if (last_answer >= measured_start && at - last_answer > longest_silence) {
        longest_silence = at - last_answer;
        longest_silence_at = last_answer - measured_start;
      }
      last_answer = at;
      long k = c->k;
      if (whole && ((status >= 200 && status < 300) || status == 304)) {
        latency[k] = at - c->due_ns;
        from_send[k] = at - c->sent_ns;
        ok[k] = 1;
      } else if (k >= warmup) {
        if (failures++ == 0) fprintf(stderr, "loadgen: first failure, request %ld: %s%.*s\n", k, whole ? "" : "connection closed; ", (int)(c->used < 200 ? c->used : 200), c->buffer);
      }
      if (whole) consume(c, end);
      if (c->closed) {
        // Reopened at once (a blocking connect on loopback): counted, and the next request goes on it.
        reopen(epoll, c, i, host, port);
        reconnects += 1;
      }
      c->k = -1;
      answered += 1;
      if (backlog_head < backlog_tail) { SEND(i, backlog[backlog_head], backlog_due[backlog_head]); backlog_head++; }
      else idle[idle_count++] = i;
    }
  }
  if (send_ended == 0) send_ended = now_ns(CLOCK_MONOTONIC);

  double *lat = malloc(sizeof(double) * (size_t)measured), *sent = malloc(sizeof(double) * (size_t)measured), *lateness = malloc(sizeof(double) * (size_t)measured);
  long good = 0;
  double late_max = 0;
  for (long k = warmup; k < total; k++) {
    lateness[k - warmup] = late[k] / 1e6;
    if (late[k] > late_max) late_max = late[k];
    if (ok[k]) { lat[good] = latency[k] / 1e6; sent[good] = from_send[k] / 1e6; good++; }
  }
  qsort(lat, (size_t)good, sizeof(double), cmp_double);
  qsort(sent, (size_t)good, sizeof(double), cmp_double);
  qsort(lateness, (size_t)measured, sizeof(double), cmp_double);
  printf("{\"rps\":%.3f,\"targetRate\":%.3f,\"p50\":%.4f,\"p99\":%.4f,\"max\":%.4f,\"requests\":%ld,\"failures\":%ld,"
         "\"lateMs\":%.4f,\"lateP99Ms\":%.4f,\"p99FromSendMs\":%.4f,\"longestSilenceMs\":%.4f,\"longestSilenceAtMs\":%.4f,\"reconnects\":%ld}\n",
         (double)measured / ((send_ended - measured_start) / 1e9), rate, quantile(lat, good, 0.5), quantile(lat, good, 0.99),
         good ? lat[good - 1] : -1, measured, failures, late_max / 1e6, quantile(lateness, measured, 0.99), quantile(sent, good, 0.99),
         longest_silence / 1e6, longest_silence_at / 1e6, reconnects);
  return 0;
}

// The data of a whole chunked body, into out (as long as the framed body at most); answers its length.
static size_t unchunked(const char *framed, size_t length, char *out) {
  size_t at = 0, written = 0;
  while (at < length) {
    size_t size = strtoul(framed + at, NULL, 16);
    const char *line_end = memmem(framed + at, length - at, "\r\n", 2);
    if (size == 0 || !line_end) break;
    at = (size_t)(line_end - framed) + 2;
    memcpy(out + written, framed + at, size);
    written += size;
    at += size + 2;
  }
  return written;
}

static void print_json_string(const char *s, size_t n) {
  putchar('"');
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (ch == '"' || ch == '\\') printf("\\%c", ch);
    else if (ch < 0x20) printf("\\u%04x", ch);
    else putchar(ch);
  }
  putchar('"');
}

static int hold(const char *host, int port, int count, request_t *request) {
  connection_t *conns = calloc((size_t)count, sizeof(connection_t));
  int epoll = epoll_create1(0);
  for (int i = 0; i < count; i++) {
    connection_t *c = &conns[i];
    connection_init(c, host, port);
    if (write_all(c->fd, request->bytes, request->length) < 0) die("write");
    set_nonblocking(c->fd);
    struct epoll_event event = { .events = EPOLLIN, .data.u32 = (uint32_t)i };
    if (epoll_ctl(epoll, EPOLL_CTL_ADD, c->fd, &event) < 0) die("epoll_ctl");
  }
  printf("connected\n");
  fflush(stdout);
  int *statuses = calloc((size_t)count, sizeof(int));
  // Distinct bodies, up to a few: every waiter must get the same answer.
  enum { MAX_BODIES = 4 };
  char *bodies[MAX_BODIES];
  size_t body_lengths[MAX_BODIES];
  int distinct = 0, answered = 0;
  double first_at = 0, last_at = 0;
  struct epoll_event events[256];
  while (answered < count) {
    int n = epoll_wait(epoll, events, 256, -1);
    if (n < 0) { if (errno == EINTR) continue; die("epoll_wait"); }
    for (int e = 0; e < n; e++) {
      connection_t *c = &conns[events[e].data.u32];
      int status; const char *body; size_t body_length, end;
      int whole = read_answer(c, &status, &body, &body_length, &end);
      if (!whole && !c->closed) continue;
      double at = now_ns(CLOCK_REALTIME) / 1e6;
      if (at > last_at) last_at = at;
      if (first_at == 0) first_at = at;
      statuses[answered++] = whole ? status : 0;
      epoll_ctl(epoll, EPOLL_CTL_DEL, c->fd, NULL);
      if (!whole) continue;
      char *data = (char *)body;
      if (c->chunked) {
        data = malloc(body_length);
        body_length = unchunked(body, body_length, data);
        body = data;
      }
      int seen = 0;
      for (int b = 0; b < distinct; b++) seen |= body_lengths[b] == body_length && memcmp(bodies[b], body, body_length) == 0;
      if (!seen && distinct < MAX_BODIES) {
        bodies[distinct] = malloc(body_length);
        memcpy(bodies[distinct], body, body_length);
        body_lengths[distinct++] = body_length;
      }
      if (c->chunked) free(data);
    }
  }
  printf("{\"firstAt\":%.3f,\"lastAt\":%.3f,\"statuses\":[", first_at, last_at);
  for (int i = 0; i < count; i++) printf(i ? ",%d" : "%d", statuses[i]);
  printf("],\"bodies\":[");
  for (int b = 0; b < distinct; b++) {
    if (b) putchar(',');
    print_json_string(bodies[b], body_lengths[b]);
  }
  printf("]}\n");
  return 0;
}

// How late this process wakes from a 200 µs sleep, over `seconds`, with nothing else to do: the
// machine's own scheduling hiccups, which a paced p99 of a few milliseconds cannot be below.
static int jitter(double seconds) {
  prctl(PR_SET_TIMERSLACK, 1UL);
  long capacity = 1 << 16, n = 0, over_2ms = 0;
  double *late = malloc(sizeof(double) * (size_t)capacity);
  double start = now_ns(CLOCK_MONOTONIC);
  while (now_ns(CLOCK_MONOTONIC) - start < seconds * 1e9) {
    double before = now_ns(CLOCK_MONOTONIC);
    struct timespec pause = { 0, 200000 };
    nanosleep(&pause, NULL);
    double ms = (now_ns(CLOCK_MONOTONIC) - before - 200000) / 1e6;
    if (ms > 2) over_2ms += 1;
    if (n == capacity) late = realloc(late, sizeof(double) * (size_t)(capacity *= 2));
    late[n++] = ms;
  }
  qsort(late, (size_t)n, sizeof(double), cmp_double);
  printf("{\"wakeups\":%ld,\"p50Ms\":%.4f,\"p99Ms\":%.4f,\"maxMs\":%.4f,\"over2MsPerSecond\":%.3f}\n", n, quantile(late, n, 0.5), quantile(late, n, 0.99), late[n - 1], (double)over_2ms / seconds);
  return 0;
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  if (argc == 9 && strcmp(argv[1], "paced") == 0) {
    long count;
    request_t *requests = read_requests(argv[8], &count);
    return paced(argv[2], atoi(argv[3]), atof(argv[4]), atof(argv[5]), atof(argv[6]), atoi(argv[7]), requests, count);
  }
  if (argc == 6 && strcmp(argv[1], "hold") == 0) {
    long count;
    request_t *requests = read_requests(argv[5], &count);
    return hold(argv[2], atoi(argv[3]), atoi(argv[4]), &requests[0]);
  }
  if (argc == 3 && strcmp(argv[1], "jitter") == 0) return jitter(atof(argv[2]));
  fprintf(stderr, "usage: loadgen paced <host> <port> <rate> <seconds> <warmup-seconds> <connections> <requests-file>\n"
                  "       loadgen hold <host> <port> <count> <requests-file>\n"
                  "       loadgen jitter <seconds>\n");
  return 2;
}
