// Package frame is Titan's STOMP 1.0/1.1/1.2 codec: the Frame and Header types, an
// incremental zero-copy Parser and an allocation-free Encoder.
//
// # Wire format (STOMP 1.2, "Augmented BNF")
//
//	frame   = command EOL *(header EOL) EOL *OCTET NUL *(EOL)
//	command = "CONNECT" | "STOMP" | "SEND" | ... (see Command)
//	header  = header-name ":" header-value
//	EOL     = [CR] LF
//
// Between frames a peer may send any number of EOLs as heart-beats; the Parser skips them.
// The body ends at the first NUL unless a content-length header gives its size in bytes, in
// which case the body is exactly that many octets (NULs included) and must be followed by NUL.
//
// # Escaping (STOMP 1.2, "Value Encoding")
//
// In 1.2 header names and values escape CR, LF, ":" and "\" as \r \n \c \\; 1.1 has the same
// rules without \r; 1.0 has none. CONNECT, STOMP and CONNECTED frames are never escaped. An
// undefined escape sequence is a protocol error (ErrBadEscape).
//
// # Repeated headers
//
// A frame keeps every header in wire order; Frame.Get returns the first one, as the spec
// requires ("only the first header entry SHOULD be used").
//
// # Concurrency and lifetimes
//
// A Parser belongs to one reading goroutine. The *Frame it returns, and every string and slice
// inside it, point into the Parser's read buffer and are valid only until the next call to
// ReadFrame; call Frame.Clone to keep a frame. Encoding functions are pure and safe for
// concurrent use.
package frame
