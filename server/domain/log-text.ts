/**
 * Text that a data plane reports (build output in log lines, a failure's first line in a status
 * message) is stored whatever it holds, so that a report always lands: a NUL cannot be stored in
 * PostgreSQL text at all, and other control characters only garble a terminal that prints the log.
 * Tab and newline are kept; a CRLF line end becomes a newline; colour and cursor sequences are
 * dropped whole (the log is stored without them, contract §11); every other control character
 * becomes U+FFFD, so the line still shows that something was there.
 */
export function sanitiseReportedText(text: string): string {
  if (!CONTROL.test(text)) return text;
  return text.replace(CRLF, '\n').replace(ANSI_SEQUENCE, '').replace(CONTROL_GLOBAL, '\uFFFD');
}

// C0 controls but tab (09) and newline (0A), DEL, and the C1 range that terminals also act on.
const CONTROL = /[\u0000-\u0008\u000B-\u001F\u007F-\u009F]/;
const CONTROL_GLOBAL = new RegExp(CONTROL.source, 'g');
const CRLF = /\r\n/g;
// CSI (ESC [ … final byte) and OSC (ESC ] … BEL or ESC \) sequences.
const ANSI_SEQUENCE = /\u001B\[[0-?]*[ -/]*[@-~]|\u001B\][^\u0007\u001B]*(?:\u0007|\u001B\\)/g;
