package frame

import "errors"

// ErrBodyNotAllowed is the sentinel of CheckBody's error: a frame that must not carry a body
// carried one.
var ErrBodyNotAllowed = errors.New("frame: body not allowed")

// BodyAllowed reports whether a frame of command c may carry a body. STOMP 1.2 (and 1.1),
// "Frames and Headers": "Only the SEND, MESSAGE, and ERROR frames MAY have a body. All other
// frames MUST NOT have a body."
func (c Command) BodyAllowed() bool {
	return c == CmdSend || c == CmdMessage || c == CmdError
}

// CheckBody returns a fatal ProtocolError (message "body not allowed", receipt-id echoed)
// when f's command must not carry a body and f has one, and nil otherwise. A body made only
// of end-of-line octets (LF, CR) does not count: clients send trailing EOLs after a frame's
// blank line (a CONNECT "body" of "\n" is common), and the spec lets EOLs follow any frame.
// Frames whose command allows a body are never refused here.
func CheckBody(f *Frame) *ProtocolError {
	if f.Command.BodyAllowed() {
		return nil
	}
	for _, b := range f.Body {
		if b != '\n' && b != '\r' {
			return protoErr(ErrBodyNotAllowed, f.Value(HdrReceipt),
				f.Command.String()+" frames must not carry a body (STOMP 1.2, \"Frames and Headers\")")
		}
	}
	return nil
}
