package frame

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"strings"
	"sync"
	"unsafe"
)

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
// arrive in any number of reads, and the search for a line end or a body's NUL never rescans
// bytes. Limits are checked before the buffer grows, and growth is capped at one maximal frame
// (MaxHeaderBytes+MaxBodyBytes+1 bytes, or the initial 4 KiB if that is more), so a peer
// cannot make a Parser hold more than that.
//
// The result does not depend on how the stream is split into reads: every error is the one a
// parser fed one byte at a time would report, at the first byte that proves it.
//
// A Parser is not safe for concurrent use.
type Parser struct {
	rd       io.Reader
	lim      Limits
	maxFrame int // largest possible frame in bytes: MaxHeaderBytes + MaxBodyBytes + NUL
	version  Version

	buf  []byte
	r, w int   // unread bytes are buf[r:w]
	rerr error // sticky read error, reported once buffered data is used up

	// per-frame state, offsets relative to r
	state      parseState
	pos        int // start of the current header line, or next body byte to scan
	scanned    int // in stateHeaders, bytes before scanned hold no LF of the current line
	cmd        Command
	cmdSeen    bool // the command line has been read
	cmdEnd     int  // end of the command line (EOL excluded), once cmdSeen
	badCmd     bool // the command line named no command: reported at the end of the headers
	offs       []hdrOff
	bodyStart  int
	contentLen int // -1: none

	f    Frame
	hdrs []Header

	idle     IdleReader // rd as an IdleReader, or nil: then buf is kept between frames
	bufClass int        // the size class (readBufPools) takeBuf takes
	filled   bool       // the last read filled buf to its end: more input is likely waiting
	shrink   bool       // the last idle read used under a quarter of buf: release steps the class down
	reserved int64      // bytes of buf reserved from lim.LargeFrames (a buffer over idleBufBytes)
}

// IdleReader is a Reader that can wait for input without holding a buffer. ReadIdle waits
// until input is ready and reads it into the slice b.Take returns; when a read attempt finds
// no input after all, it calls b.Put (giving that slice back) before waiting again, so Take
// and Put may alternate any number of times and the slice of the last Take holds the bytes
// read. It returns what Read would. Parser reads through ReadIdle whenever it has no bytes
// buffered, so a connection that waits for its next frame holds no read buffer (as netty
// and Artemis release theirs while a channel is idle).
type IdleReader interface {
	ReadIdle(b IdleBuffer) (int, error)
}

// IdleBuffer is the read buffer an IdleReader fills: Take returns it (taking it from a pool),
// Put gives it back. Both are called from the goroutine that called ReadIdle.
type IdleBuffer interface {
	Take() []byte
	Put()
}

// idleBuffer is a Parser as the IdleBuffer it passes to ReadIdle (a pointer: passing it as an
// interface allocates nothing, and a parser holds no closures for it).
type idleBuffer Parser

func (b *idleBuffer) Take() []byte { return (*Parser)(b).takeBuf() }
func (b *idleBuffer) Put()         { (*Parser)(b).releaseBuf() }

// readBufPools hold the read buffers of parsers whose reader is an IdleReader, one pool per
// size class: minBufBytes << i, up to idleBufBytes. Entries are unsafe.Pointers to the first
// byte (pointer-shaped: no allocation to pool them).
var readBufPools [readBufClasses]sync.Pool

const readBufClasses = 5 // 4, 8, 16, 32 and 64 KiB

// readBufClass returns the pool index of a buffer of n bytes, or -1 when n is no class.
func readBufClass(n int) int {
	for i := range readBufClasses {
		if n == minBufBytes<<i {
			return i
		}
	}
	return -1
}

// NewParser returns a parser reading rd under lim. It unescapes header values as STOMP 1.2
// until SetVersion says otherwise.
func NewParser(rd io.Reader, lim Limits) *Parser {
	lim = lim.withDefaults()
	p := &Parser{
		rd:         rd,
		lim:        lim,
		maxFrame:   lim.MaxHeaderBytes + lim.MaxBodyBytes + 1,
		version:    V12,
		contentLen: -1,
	}
	if ir, ok := rd.(IdleReader); ok {
		p.idle = ir // buf is taken from readBufPools when input arrives
	} else {
		p.buf = make([]byte, minBufBytes)
	}
	return p
}

// ReleaseScratch drops the header arrays that the frames read so far grew and the last
// frame, which must no longer be in use: call it after a frame that is rarely followed by
// another soon (CONNECT, on a connection that may stay idle), so an idle connection holds
// none; the next frame grows them again.
func (p *Parser) ReleaseScratch() {
	p.offs, p.hdrs, p.f = nil, nil, Frame{}
}

// SetLimits replaces the limits later frames are read under (zero fields take the defaults
// of DefaultLimits). Call it between frames only, from the goroutine that reads: the session
// reads CONNECT under small limits of its own and the rest under the listener's (issue 29).
func (p *Parser) SetLimits(lim Limits) {
	p.lim = lim.withDefaults()
	p.maxFrame = p.lim.MaxHeaderBytes + p.lim.MaxBodyBytes + 1
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
	if p.r == p.w {
		// Nothing buffered: the previous frame is released, so start reading at the front
		// of the buffer again, and give back a buffer that a large frame made grow.
		switch {
		case p.idle != nil:
			p.releaseBuf() // the previous frame is released: so is the buffer
		case len(p.buf) > idleBufBytes:
			p.buf = make([]byte, minBufBytes)
			p.unreserve()
		}
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
	if p.idle != nil && p.state == stateStart && p.r == p.w {
		p.releaseBuf() // only heart-beat EOLs were buffered: wait for the next frame without it
		p.r, p.w = 0, 0
	}
	if p.buf == nil {
		return p.fillIdle()
	}
	if p.idle != nil && p.filled && len(p.buf) < idleBufBytes {
		// The last read filled the buffer, so more input waits in the socket: take the next
		// pooled size class, so that frames close to the buffer's size (4 KiB bodies in a 4 or
		// 8 KiB buffer) are not read one per system call. nats-server grows its read
		// buffer on a full read the same way; the class sticks until the connection idles
		// with small frames (releaseBuf).
		p.growPooled()
	}
	if p.r > 0 && (p.w == len(p.buf) || need > len(p.buf)-p.r) {
		n := copy(p.buf, p.buf[p.r:p.w])
		p.r, p.w = 0, n
	}
	if need > len(p.buf) || p.w == len(p.buf) {
		// Never beyond one maximal frame: step reports a limit error before a pending frame
		// fills that much, so need and the buffered bytes stay below maxFrame; the max is
		// only a guard against losing buffered bytes should that ever change.
		size := max(min(2*len(p.buf), p.maxFrame), need, p.w+1)
		if p.idle != nil && size < idleBufBytes {
			// A pooled size class, so that the grown buffer is pooled too: a connection
			// that carries frames larger than 4 KiB does not allocate per frame.
			size = min(max(1<<bits.Len(uint(size-1)), size), max(p.maxFrame, need, p.w+1))
		}
		if size > idleBufBytes {
			if !p.lim.LargeFrames.reserve(int64(size) - p.reserved) {
				p.rerr = protoErr(ErrLargeFrameBudget, p.receipt(nil), fmt.Sprintf(
					"the broker holds its maximum of %d bytes of large frames in progress (max-large-frame-bytes); retry later", p.lim.LargeFrames.Max()))
				return p.rerr
			}
			p.reserved = int64(size)
		}
		nb := make([]byte, size)
		copy(nb, p.buf[p.r:p.w])
		p.buf, p.w, p.r = nb, p.w-p.r, 0
	}
	for range 100 {
		n, err := p.rd.Read(p.buf[p.w:])
		p.w += n
		p.filled = n > 0 && p.w == len(p.buf)
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

// fillIdle reads into a pooled buffer through the IdleReader (nothing is buffered: r == w
// == 0).
func (p *Parser) fillIdle() error {
	n, err := p.idle.ReadIdle((*idleBuffer)(p))
	if n <= 0 || p.buf == nil {
		p.releaseBuf() // nothing read: the connection ends or fails without a buffer
		if err == nil {
			err = io.ErrNoProgress
		}
		p.rerr = err
		return err
	}
	p.w += n
	p.filled = p.w == len(p.buf)
	// Input that comes in small reads again makes the next idle read take the class below,
	// so that connections that once sent a burst do not each hold 64 KiB per read.
	p.shrink = n < len(p.buf)/4
	if err != nil {
		p.rerr = err // reported once the bytes read are used up
	}
	return nil
}

// growPooled moves the unread bytes into a buffer of the next pooled size class and gives
// the current one back to its pool. The previous frame is released (fill runs inside
// ReadFrame), so nothing points into the old buffer.
func (p *Parser) growPooled() {
	c := readBufClass(len(p.buf))
	if c < 0 || c+1 >= readBufClasses || cap(p.buf) != len(p.buf) {
		return
	}
	old := p.buf[:len(p.buf):len(p.buf)]
	p.bufClass = c + 1
	p.takeBuf()
	p.w = copy(p.buf, old[p.r:p.w])
	p.r = 0
	p.filled = false
	readBufPools[c].Put(unsafe.Pointer(&old[0]))
}

// takeBuf gives the parser a pooled buffer of the size class its last buffer had and returns
// it.
func (p *Parser) takeBuf() []byte {
	size := minBufBytes << p.bufClass
	if v := readBufPools[p.bufClass].Get(); v != nil {
		p.buf = unsafe.Slice((*byte)(v.(unsafe.Pointer)), size)
	} else {
		p.buf = make([]byte, size)
	}
	return p.buf
}

// releaseBuf gives the parser's buffer back to the pool of its size class (a buffer of no
// class, grown for a frame over 64 KiB, is left to the collector) and remembers the class for
// the next takeBuf.
func (p *Parser) releaseBuf() {
	p.unreserve()
	if c := readBufClass(len(p.buf)); c >= 0 && cap(p.buf) == len(p.buf) {
		readBufPools[c].Put(unsafe.Pointer(&p.buf[0]))
		p.bufClass = c
		if p.shrink && c > 0 {
			p.bufClass = c - 1
		}
	} else if len(p.buf) > idleBufBytes {
		p.bufClass = readBufClasses - 1
	}
	p.buf = nil
}

// unreserve gives back what the buffer reserved from Limits.LargeFrames.
func (p *Parser) unreserve() {
	p.lim.LargeFrames.release(p.reserved)
	p.reserved = 0
}

// Close gives back the parser's reservation of Limits.LargeFrames (a connection that ends in
// the middle of a large frame); the parser must not be used after it. Idempotent.
func (p *Parser) Close() {
	p.unreserve()
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
				return nil, 0, protoErr(ErrBareCR, "", "a CR between frames must be followed by LF (an EOL is LF or CR LF)")
			}
			break
		}
		if p.r == p.w {
			return nil, 1, nil
		}
		p.state, p.pos, p.scanned, p.offs, p.contentLen = stateHeaders, 0, 0, p.offs[:0], -1
		p.cmd, p.cmdSeen, p.badCmd = CmdUnknown, false, false
	}
	if p.state == stateHeaders {
		if err := p.scanHeaders(); err != nil {
			if p.badCmd {
				// Whatever went wrong later, the first fault was the command.
				return nil, 0, p.unknownCommand()
			}
			return nil, 0, err
		}
		if p.state == stateHeaders {
			return nil, p.scanned + 1, nil
		}
	}
	// stateBody
	avail := p.w - p.r
	if p.contentLen >= 0 {
		end := p.bodyStart + p.contentLen
		if avail <= end {
			return nil, end + 1, nil
		}
		if c := p.buf[p.r+end]; c != 0 {
			return nil, 0, protoErr(ErrMissingNUL, p.receipt(nil), fmt.Sprintf(
				"content-length is %d, but the octet after %d body octets is %s, not the NUL that ends the frame (content-length counts every body octet)",
				p.contentLen, p.contentLen, Echo(string([]byte{c}))))
		}
		return p.finish(end)
	}
	if i := bytes.IndexByte(p.buf[p.r+p.pos:p.w], 0); i >= 0 {
		nul := p.pos + i
		if nul-p.bodyStart > p.lim.MaxBodyBytes {
			// The limit holds however the body arrived, not only when it spans reads.
			return nil, 0, p.bodyTooLarge()
		}
		return p.finish(nul)
	}
	p.pos = avail
	if avail-p.bodyStart > p.lim.MaxBodyBytes {
		return nil, 0, p.bodyTooLarge()
	}
	return nil, avail + 1, nil
}

// scanHeaders consumes complete lines from pos. On the blank line it moves to stateBody.
//
// Each check runs on whole lines, except the two limits, which must also stop a line that
// never ends; partialLimitErr makes those independent of where reads split the stream.
func (p *Parser) scanHeaders() error {
	base := p.buf[p.r:p.w]
	for {
		from := max(p.pos, p.scanned)
		i := bytes.IndexByte(base[from:], '\n')
		if i < 0 {
			p.scanned = len(base)
			return p.partialLimitErr(len(base))
		}
		lf := from + i
		if err := p.partialLimitErr(lf); err != nil {
			return err
		}
		ls, le := p.pos, lf // line is base[ls:le]
		p.pos = lf + 1
		if le > ls && base[le-1] == '\r' {
			le--
		}
		line := base[ls:le]
		if bytes.IndexByte(line, '\r') >= 0 {
			return protoErr(ErrBareCR, "", p.lineName()+" "+EchoLine(string(line))+" has a CR not followed by LF (an EOL is LF or CR LF)")
		}
		if len(line) > p.lim.MaxHeaderLineBytes {
			return p.lineTooLong(base, ls)
		}
		if p.pos > p.lim.MaxHeaderBytes {
			return p.sectionTooLarge()
		}
		if !p.cmdSeen {
			// An unknown command is reported once the header block ends (bounded by the
			// limits), so that the ERROR can echo the frame's receipt; the body is never read.
			p.cmdSeen, p.cmdEnd = true, le
			p.cmd = parseCommand(line)
			p.badCmd = p.cmd == CmdUnknown
			continue
		}
		if len(line) == 0 {
			if p.badCmd {
				return p.unknownCommand()
			}
			p.state, p.bodyStart = stateBody, p.pos
			p.pos = p.bodyStart
			return p.readContentLength()
		}
		if bytes.IndexByte(line, 0) >= 0 {
			// A NUL ends a frame; inside a header it would let a publisher forge frames
			// for every subscriber that receives the header back.
			return protoErr(ErrMalformedHeader, p.receipt(nil), "header line "+EchoLine(string(line))+" contains a NUL octet; a NUL ends a frame and cannot appear in a header")
		}
		if len(p.offs) >= p.lim.MaxHeaders {
			return protoErr(ErrTooManyHeaders, p.receipt(nil), fmt.Sprintf("the frame has more than %d headers (max-headers)", p.lim.MaxHeaders))
		}
		c := bytes.IndexByte(line, ':')
		if c < 0 {
			return protoErr(ErrMalformedHeader, "", "header line "+Echo(string(line))+" has no colon; a header is name:value")
		}
		if c == 0 {
			return protoErr(ErrMalformedHeader, "", "header line "+Echo(string(line))+" has an empty name; a header is name:value with a non-empty name")
		}
		p.offs = append(p.offs, hdrOff{ks: ls, colon: ls + c, end: le})
	}
}

// partialLimitErr returns the limit error, if any, that a parser fed one byte at a time would
// have reported while the current line (from pos) had no LF yet and the frame had at most e
// bytes. Both limits grow monotonically with e, so the one crossed first wins (the line limit
// on a tie). The line limit allows one extra byte for the CR of a CRLF; the header section
// is over its limit once e reaches it, because the LF is still to come.
func (p *Parser) partialLimitErr(e int) error {
	lineAt := p.pos + p.lim.MaxHeaderLineBytes + 2
	sectionAt := p.lim.MaxHeaderBytes
	switch {
	case lineAt <= e && lineAt <= sectionAt:
		return p.lineTooLong(p.buf[p.r:p.w], p.pos)
	case sectionAt <= e:
		return p.sectionTooLarge()
	}
	return nil
}

// lineName names the line being scanned in an error detail.
func (p *Parser) lineName() string {
	if p.cmdSeen {
		return "header line"
	}
	return "command line"
}

// lineTooLong reports the line that starts at ls in base. Both callers have more than
// MaxHeaderLineBytes octets of it, so the echoed prefix does not depend on how the stream
// was split.
func (p *Parser) lineTooLong(base []byte, ls int) *ProtocolError {
	n := min(len(base)-ls, p.lim.MaxHeaderLineBytes+1, MaxEchoBytes+1)
	return protoErr(ErrHeaderLineTooLong, p.receipt(nil), fmt.Sprintf(
		"%s %s is longer than %d octets (max-header-length)", p.lineName(), EchoLine(string(base[ls:ls+n])), p.lim.MaxHeaderLineBytes))
}

func (p *Parser) sectionTooLarge() *ProtocolError {
	return protoErr(ErrHeaderSectionTooLarge, p.receipt(nil), fmt.Sprintf(
		"the command and headers of the frame exceed %d octets (max-headers-bytes)", p.lim.MaxHeaderBytes))
}

func (p *Parser) bodyTooLarge() *ProtocolError {
	return protoErr(ErrBodyTooLarge, p.receipt(nil), fmt.Sprintf(
		"the body exceeds %d octets (max-body-length) before its NUL", p.lim.MaxBodyBytes))
}

// unknownCommand reports the command line read; the header block has ended (or hit a limit)
// by the time it is called, so the line is whole.
func (p *Parser) unknownCommand() *ProtocolError {
	return protoErr(ErrUnknownCommand, p.receipt(nil), "command "+Echo(string(p.buf[p.r:p.r+p.cmdEnd]))+
		" is not a STOMP command; a client sends CONNECT, STOMP, SEND, SUBSCRIBE, UNSUBSCRIBE, ACK, NACK, BEGIN, COMMIT, ABORT or DISCONNECT, in upper case")
}

// readContentLength finds the first content-length header and checks it against the limits.
func (p *Parser) readContentLength() error {
	base := p.buf[p.r:p.w]
	for _, o := range p.offs {
		if string(base[o.ks:o.colon]) == HdrContentLength {
			n, err := parseContentLength(unsafe.String(unsafe.SliceData(base[o.colon+1:o.end]), o.end-o.colon-1))
			if err != nil {
				return protoErr(err, p.receipt(nil), "content-length "+Echo(string(base[o.colon+1:o.end]))+
					" is not a non-negative decimal integer of at most 18 digits")
			}
			if n > p.lim.MaxBodyBytes {
				return protoErr(ErrBodyTooLarge, p.receipt(nil), fmt.Sprintf(
					"content-length %d exceeds the largest body allowed, %d octets (max-body-length)", n, p.lim.MaxBodyBytes))
			}
			p.contentLen = n
			return nil
		}
	}
	return nil
}

// escaped reports whether the current frame's headers are escaped (STOMP 1.2, "Value
// Encoding": never in 1.0, nor in CONNECT, STOMP and CONNECTED frames).
func (p *Parser) escaped() bool {
	return p.version != V10 && p.cmd != CmdConnect && p.cmd != CmdStomp && p.cmd != CmdConnected
}

// receipt returns a copy of the frame's first receipt header, decoded, for the receipt-id of
// an ERROR frame. decoded holds the headers finish has already unescaped in place (their raw
// bytes are gone); the raw bytes of the others are intact. A receipt whose own escapes are
// bad is returned raw. Only error paths call it, so it may allocate.
func (p *Parser) receipt(decoded []Header) string {
	for _, h := range decoded {
		if h.Key == HdrReceipt {
			return strings.Clone(h.Value)
		}
	}
	base := p.buf[p.r:p.w]
	for _, o := range p.offs[len(decoded):] {
		if string(base[o.ks:o.colon]) != HdrReceipt {
			continue
		}
		v := []byte(string(base[o.colon+1 : o.end]))
		if p.escaped() {
			if u, err := unescapeInPlace(v, p.version); err == nil {
				v = u
			}
		}
		return string(v)
	}
	return ""
}

// finish builds the frame whose NUL is at offset nul, and consumes it.
func (p *Parser) finish(nul int) (*Frame, int, error) {
	base := p.buf[p.r:p.w]
	escaped := p.escaped()
	hdrs := p.hdrs[:0]
	for _, o := range p.offs {
		k := base[o.ks:o.colon]
		v := base[o.colon+1 : o.end]
		if escaped {
			uk, err := unescapeInPlace(k, p.version)
			if err != nil { // k is unchanged
				p.hdrs = hdrs
				return nil, 0, protoErr(err, p.receipt(hdrs), "header name "+Echo(string(k))+badEscapeDetail(k, p.version))
			}
			k = uk
			uv, err := unescapeInPlace(v, p.version)
			if err != nil { // v is unchanged
				p.hdrs = hdrs
				return nil, 0, protoErr(err, p.receipt(hdrs), "the value of header "+Echo(string(k))+badEscapeDetail(v, p.version))
			}
			v = uv
		}
		hdrs = append(hdrs, Header{Key: bstr(k), Value: bstr(v)})
	}
	p.hdrs = hdrs
	p.f = Frame{Command: p.cmd, Headers: hdrs, Body: base[p.bodyStart:nul:nul]}
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

// badEscapeDetail names the first escape in b that v does not define (b is as received:
// unescapeInPlace leaves it unchanged on error) and the escapes v defines.
func badEscapeDetail(b []byte, v Version) string {
	defined := `\r, \n, \c and \\`
	if v < V12 {
		defined = `\n, \c and \\`
	}
	seq := `\` // a backslash that ends the text
	for i := 0; i+1 < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		if c := b[i+1]; c == 'n' || c == 'c' || c == '\\' || (c == 'r' && v >= V12) {
			i++
			continue
		}
		seq = string(b[i : i+2])
		break
	}
	return " has " + Echo(seq) + ", an escape STOMP " + v.String() + " does not define (it defines " + defined + ")"
}

// unescapeInPlace decodes STOMP escapes in b, reusing its memory (STOMP 1.2, "Value
// Encoding"; 1.1 lacks \r). It checks every escape before writing, so on ErrBadEscape b is
// unchanged.
func unescapeInPlace(b []byte, v Version) ([]byte, error) {
	i := bytes.IndexByte(b, '\\')
	if i < 0 {
		return b, nil
	}
	for j := i; j < len(b); j++ {
		if b[j] != '\\' {
			continue
		}
		j++
		if j == len(b) {
			return nil, ErrBadEscape
		}
		switch b[j] {
		case 'n', 'c', '\\':
		case 'r':
			if v < V12 {
				return nil, ErrBadEscape
			}
		default:
			return nil, ErrBadEscape
		}
	}
	w := i
	for ; i < len(b); i++ {
		c := b[i]
		if c == '\\' {
			i++
			switch b[i] {
			case 'n':
				c = '\n'
			case 'c':
				c = ':'
			case 'r':
				c = '\r'
			default: // '\\', checked above
				c = '\\'
			}
		}
		b[w] = c
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
