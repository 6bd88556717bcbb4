package frame

import (
	"bytes"
	"errors"
	"io"
	"unsafe"
)

// Limits bounds what a Parser accepts before it allocates. Zero fields take the defaults of
// DefaultLimits; negative values are invalid.
type Limits struct {
	// MaxHeaderLineBytes bounds one command or header line, EOL excluded (default 10240, the
	// max-header-length of Titan's protocol-options).
	MaxHeaderLineBytes int
	// MaxHeaders bounds the number of headers in one frame (default 1000).
	MaxHeaders int
	// MaxHeaderBytes bounds the command line plus all header lines of one frame (default
	// 256 KiB).
	MaxHeaderBytes int
	// MaxBodyBytes bounds one frame's body (default 16 MiB).
	MaxBodyBytes int
}

// Default limit values; see Limits.
const (
	DefaultMaxHeaderLineBytes = 10240
	DefaultMaxHeaders         = 1000
	DefaultMaxHeaderBytes     = 256 << 10
	DefaultMaxBodyBytes       = 16 << 20
)

// DefaultLimits returns the limits Titan ships with.
func DefaultLimits() Limits {
	return Limits{
		MaxHeaderLineBytes: DefaultMaxHeaderLineBytes,
		MaxHeaders:         DefaultMaxHeaders,
		MaxHeaderBytes:     DefaultMaxHeaderBytes,
		MaxBodyBytes:       DefaultMaxBodyBytes,
	}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxHeaderLineBytes <= 0 {
		l.MaxHeaderLineBytes = d.MaxHeaderLineBytes
	}
	if l.MaxHeaders <= 0 {
		l.MaxHeaders = d.MaxHeaders
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = d.MaxHeaderBytes
	}
	if l.MaxBodyBytes <= 0 {
		l.MaxBodyBytes = d.MaxBodyBytes
	}
	return l
}

const (
	minBufBytes  = 4 << 10
	idleBufBytes = 64 << 10
)

type parseState uint8

const (
	stateStart parseState = iota
	stateHeaders
	stateBody
)

// hdrOff locates one header line relative to the start of the frame: key is [ks,colon),
// value is (colon,end).
type hdrOff struct{ ks, colon, end int }

// Parser reads frames from a byte stream. It is an incremental state machine: a frame may
// arrive in any number of reads, and no byte is scanned twice. Limits are checked before the
// buffer grows, so a peer cannot make a Parser hold more than MaxHeaderBytes+MaxBodyBytes+2.
//
// A Parser is not safe for concurrent use.
type Parser struct {
	rd      io.Reader
	lim     Limits
	version Version

	buf  []byte
	r, w int   // unread bytes are buf[r:w]
	rerr error // sticky read error, reported once buffered data is used up

	// per-frame state, offsets relative to r
	state      parseState
	pos        int // next byte to scan
	cmdEnd     int
	offs       []hdrOff
	bodyStart  int
	contentLen int // -1: none

	f    Frame
	hdrs []Header
}

// NewParser returns a parser reading rd under lim. It unescapes header values as STOMP 1.2
// until SetVersion says otherwise.
func NewParser(rd io.Reader, lim Limits) *Parser {
	return &Parser{rd: rd, lim: lim.withDefaults(), version: V12, buf: make([]byte, minBufBytes), contentLen: -1}
}

// SetVersion sets the version whose escaping rules apply to later frames (CONNECT, STOMP and
// CONNECTED are never unescaped).
func (p *Parser) SetVersion(v Version) { p.version = v }

// Buffered returns the number of bytes read from the stream but not yet consumed.
func (p *Parser) Buffered() int { return p.w - p.r }

// ReadFrame returns the next frame, skipping heart-beat EOLs between frames.
//
// The frame and everything it references are valid until the next ReadFrame call. At a clean
// end of stream it returns io.EOF; a stream that ends inside a frame returns
// io.ErrUnexpectedEOF; a read error is returned as is (after buffered frames). A protocol
// violation returns a *ProtocolError wrapping one of the package's sentinels, after which the
// Parser must not be used again.
func (p *Parser) ReadFrame() (*Frame, error) {
	if p.r == p.w && len(p.buf) > idleBufBytes {
		p.buf = make([]byte, minBufBytes)
		p.r, p.w = 0, 0
	}
	for {
		f, need, err := p.step()
		if err != nil {
			return nil, err
		}
		if f != nil {
			return f, nil
		}
		if err := p.fill(need); err != nil {
			if err == io.EOF && (p.state != stateStart || p.w > p.r) {
				if p.state == stateStart && p.onlyEOLs() {
					return nil, io.EOF
				}
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
}

func (p *Parser) onlyEOLs() bool {
	for _, c := range p.buf[p.r:p.w] {
		if c != '\r' && c != '\n' {
			return false
		}
	}
	return true
}

// fill reads more bytes, first making room for at least need bytes of frame after r.
func (p *Parser) fill(need int) error {
	if p.rerr != nil {
		return p.rerr
	}
	if p.r > 0 && (p.w == len(p.buf) || need > len(p.buf)-p.r) {
		n := copy(p.buf, p.buf[p.r:p.w])
		p.r, p.w = 0, n
	}
	if need > len(p.buf) || p.w == len(p.buf) {
		size := 2 * len(p.buf)
		if size < need {
			size = need
		}
		nb := make([]byte, size)
		copy(nb, p.buf[p.r:p.w])
		p.buf, p.w, p.r = nb, p.w-p.r, 0
	}
	for range 100 {
		n, err := p.rd.Read(p.buf[p.w:])
		p.w += n
		if err != nil {
			p.rerr = err
			if n > 0 {
				return nil
			}
			return err
		}
		if n > 0 {
			return nil
		}
	}
	p.rerr = io.ErrNoProgress
	return p.rerr
}

// step advances the state machine over buffered bytes. It returns a complete frame, or the
// number of bytes (from r) the frame needs at least, or an error.
func (p *Parser) step() (*Frame, int, error) {
	if p.state == stateStart {
		// Skip heart-beat EOLs between frames.
		for p.r < p.w {
			c := p.buf[p.r]
			if c == '\n' {
				p.r++
				continue
			}
			if c == '\r' {
				if p.r+1 == p.w {
					return nil, 2, nil
				}
				if p.buf[p.r+1] == '\n' {
					p.r += 2
					continue
				}
				return nil, 0, protoErr(ErrBareCR, "")
			}
			break
		}
		if p.r == p.w {
			return nil, 1, nil
		}
		p.state, p.pos, p.offs, p.contentLen = stateHeaders, 0, p.offs[:0], -1
		p.cmdEnd = -1
	}
	if p.state == stateHeaders {
		if err := p.scanHeaders(); err != nil {
			return nil, 0, err
		}
		if p.state == stateHeaders {
			return nil, p.pos + 1, nil
		}
	}
	// stateBody
	avail := p.w - p.r
	if p.contentLen >= 0 {
		end := p.bodyStart + p.contentLen
		if avail <= end {
			return nil, end + 1, nil
		}
		if p.buf[p.r+end] != 0 {
			return nil, 0, protoErr(ErrMissingNUL, p.rawReceipt())
		}
		return p.finish(end)
	}
	if i := bytes.IndexByte(p.buf[p.r+p.pos:p.w], 0); i >= 0 {
		return p.finish(p.pos + i)
	}
	p.pos = avail
	if avail-p.bodyStart > p.lim.MaxBodyBytes {
		return nil, 0, protoErr(ErrBodyTooLarge, p.rawReceipt())
	}
	return nil, avail + 1, nil
}

// scanHeaders consumes complete lines from pos. On the blank line it moves to stateBody.
func (p *Parser) scanHeaders() error {
	base := p.buf[p.r:p.w]
	for {
		i := bytes.IndexByte(base[p.pos:], '\n')
		if i < 0 {
			if len(base)-p.pos > p.lim.MaxHeaderLineBytes+1 {
				return protoErr(ErrHeaderLineTooLong, "")
			}
			if len(base) > p.lim.MaxHeaderBytes+2 {
				return protoErr(ErrHeaderSectionTooLarge, "")
			}
			return nil
		}
		ls, le := p.pos, p.pos+i // line is base[ls:le]
		p.pos = le + 1
		if le > ls && base[le-1] == '\r' {
			le--
		}
		line := base[ls:le]
		if bytes.IndexByte(line, '\r') >= 0 {
			return protoErr(ErrBareCR, "")
		}
		if len(line) > p.lim.MaxHeaderLineBytes {
			return protoErr(ErrHeaderLineTooLong, "")
		}
		if p.pos > p.lim.MaxHeaderBytes+2 {
			return protoErr(ErrHeaderSectionTooLarge, "")
		}
		if p.cmdEnd < 0 {
			p.cmdEnd = le
			continue
		}
		if len(line) == 0 {
			p.state, p.bodyStart = stateBody, p.pos
			p.pos = p.bodyStart
			return p.readContentLength()
		}
		if len(p.offs) >= p.lim.MaxHeaders {
			return protoErr(ErrTooManyHeaders, "")
		}
		c := bytes.IndexByte(line, ':')
		if c <= 0 {
			return protoErr(ErrMalformedHeader, "")
		}
		p.offs = append(p.offs, hdrOff{ks: ls, colon: ls + c, end: le})
	}
}

// readContentLength finds the first content-length header and checks it against the limits.
func (p *Parser) readContentLength() error {
	base := p.buf[p.r:p.w]
	for _, o := range p.offs {
		if string(base[o.ks:o.colon]) == HdrContentLength {
			n, err := parseContentLength(unsafe.String(unsafe.SliceData(base[o.colon+1:o.end]), o.end-o.colon-1))
			if err != nil {
				return protoErr(err, p.rawReceipt())
			}
			if n > p.lim.MaxBodyBytes {
				return protoErr(ErrBodyTooLarge, p.rawReceipt())
			}
			p.contentLen = n
			return nil
		}
	}
	return nil
}

// rawReceipt returns the first receipt header's raw value (copied), for receipt-id on errors.
func (p *Parser) rawReceipt() string {
	base := p.buf[p.r:p.w]
	for _, o := range p.offs {
		if string(base[o.ks:o.colon]) == HdrReceipt {
			return string(base[o.colon+1 : o.end])
		}
	}
	return ""
}

// finish builds the frame whose NUL is at offset nul, and consumes it.
func (p *Parser) finish(nul int) (*Frame, int, error) {
	base := p.buf[p.r:p.w]
	cmd := parseCommand(base[:p.cmdEnd])
	if cmd == CmdUnknown {
		return nil, 0, &ProtocolError{Reason: "unknown command", Fatal: true, Err: ErrUnknownCommand}
	}
	escaped := p.version != V10 && cmd != CmdConnect && cmd != CmdStomp && cmd != CmdConnected
	hdrs := p.hdrs[:0]
	for _, o := range p.offs {
		k := base[o.ks:o.colon]
		v := base[o.colon+1 : o.end]
		if escaped {
			var err error
			if k, err = unescapeInPlace(k, p.version); err != nil {
				return nil, 0, protoErr(err, p.rawReceipt())
			}
			if v, err = unescapeInPlace(v, p.version); err != nil {
				return nil, 0, protoErr(err, p.rawReceipt())
			}
		}
		hdrs = append(hdrs, Header{Key: bstr(k), Value: bstr(v)})
	}
	p.hdrs = hdrs
	p.f = Frame{Command: cmd, Headers: hdrs, Body: base[p.bodyStart:nul:nul]}
	p.r += nul + 1
	p.state = stateStart
	return &p.f, 0, nil
}

func bstr(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// unescapeInPlace decodes STOMP escapes in b, reusing its memory (STOMP 1.2, "Value
// Encoding"; 1.1 lacks \r).
func unescapeInPlace(b []byte, v Version) ([]byte, error) {
	i := bytes.IndexByte(b, '\\')
	if i < 0 {
		return b, nil
	}
	w := i
	for ; i < len(b); i++ {
		c := b[i]
		if c != '\\' {
			b[w] = c
			w++
			continue
		}
		if i+1 == len(b) {
			return nil, ErrBadEscape
		}
		i++
		switch b[i] {
		case 'n':
			b[w] = '\n'
		case 'c':
			b[w] = ':'
		case '\\':
			b[w] = '\\'
		case 'r':
			if v < V12 {
				return nil, ErrBadEscape
			}
			b[w] = '\r'
		default:
			return nil, ErrBadEscape
		}
		w++
	}
	return b[:w], nil
}

// IsProtocolError reports whether err is (or wraps) a *ProtocolError and returns it.
func IsProtocolError(err error) (*ProtocolError, bool) {
	var pe *ProtocolError
	ok := errors.As(err, &pe)
	return pe, ok
}
