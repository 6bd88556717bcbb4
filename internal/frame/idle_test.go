package frame

import (
	"bytes"
	"io"
	"runtime"
	"strconv"
	"testing"
)

// idleChunks is an IdleReader that serves one chunk per read and records whether the parser
// held a read buffer each time it had to wait for input (a ReadIdle call, or a plain Read).
type idleChunks struct {
	p         *Parser
	chunks    [][]byte
	idleCalls int
	heldBuf   int // reads made while the parser held a buffer and had nothing buffered
	plain     int // plain Read calls (mid-frame)
}

func (r *idleChunks) next(b []byte) (int, error) {
	if len(r.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(b, r.chunks[0])
	if n == len(r.chunks[0]) {
		r.chunks = r.chunks[1:]
	} else {
		r.chunks[0] = r.chunks[0][n:]
	}
	return n, nil
}

func (r *idleChunks) Read(b []byte) (int, error) {
	r.plain++
	if r.p.r == r.p.w && r.p.state == stateStart {
		r.heldBuf++
	}
	return r.next(b)
}

func (r *idleChunks) ReadIdle(b IdleBuffer) (int, error) {
	r.idleCalls++
	if r.p.buf != nil {
		r.heldBuf++
	}
	// A first attempt finds nothing (EAGAIN): the buffer goes back while waiting.
	b.Take()
	b.Put()
	return r.next(b.Take())
}

// TestParserHoldsNoBufferWhileIdle: with an IdleReader, the parser waits for every next frame
// (after a frame, after heart-beat EOLs) without a read buffer, reads a frame split across
// reads into one, and gives a grown buffer to the collector instead of the pool.
func TestParserHoldsNoBufferWhileIdle(t *testing.T) {
	big := append([]byte("SEND\ndestination:/q\ncontent-length:10000\n\n"), bytes.Repeat([]byte("b"), 10000)...)
	big = append(big, 0)
	r := &idleChunks{chunks: [][]byte{
		[]byte("SEND\ndestination:/q\n\none\x00"),
		[]byte("\n"), []byte("\r\n"), // heart-beats
		[]byte("SEND\ndestination:/q\n"), []byte("\ntwo\x00"), // one frame, two reads
		big,
		[]byte("SEND\ndestination:/q\n\nthree\x00SEND\ndestination:/q\n\nfour\x00"),
	}}
	p := NewParser(r, Limits{})
	r.p = p
	requireEqual(t, p.buf == nil, true)
	for _, want := range []string{"one", "two", string(bytes.Repeat([]byte("b"), 10000)), "three", "four"} {
		f, err := p.ReadFrame()
		requireNoError(t, err)
		requireEqual(t, string(f.Body), want)
	}
	_, err := p.ReadFrame()
	requireEqual(t, err, io.EOF)
	requireEqual(t, r.heldBuf, 0)
	if r.plain == 0 {
		t.Fatalf("frames split across reads were read with ReadIdle only; want plain Reads mid-frame")
	}
	requireEqual(t, p.buf == nil, true)
}

// BenchmarkParseIdleReader parses pipelined frames through an IdleReader (the TCP path),
// one read of 32 frames at a time: the pooled buffer, grown for 4 KiB bodies too, costs no
// allocation per read.
func BenchmarkParseIdleReader(b *testing.B) {
	for _, body := range []int{5, 4096} {
		b.Run(strconv.Itoa(body)+"B", func(b *testing.B) {
			frame := []byte("SEND\ndestination:/queue/a\ncontent-length:" + strconv.Itoa(body) + "\n\n")
			frame = append(append(frame, bytes.Repeat([]byte("x"), body)...), 0)
			batch := bytes.Repeat(frame, 32)
			r := &idleChunks{}
			p := NewParser(r, Limits{})
			r.p = p
			b.ReportAllocs()
			b.SetBytes(int64(len(frame)))
			for i := 0; i < b.N; i++ {
				if len(r.chunks) == 0 {
					r.chunks = append(r.chunks, batch)
				}
				if _, err := p.ReadFrame(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A parser whose reader is an IdleReader makes no read buffer until input arrives: an idle
// connection's parser costs its struct alone (a 4 KiB buffer made and dropped per
// connection was garbage the heap carried until the next GC).
func TestNewParserWithIdleReaderAllocatesNoBuffer(t *testing.T) {
	const n = 100
	ps := make([]*Parser, n)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range ps {
		ps[i] = NewParser(&idleChunks{}, Limits{})
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per > 1024 {
		t.Fatalf("NewParser with an IdleReader allocates %d B, want its struct alone (< 1 KiB)", per)
	}
	runtime.KeepAlive(ps)
}

// ReleaseScratch drops the header arrays a frame grew; the next frame parses as before.
func TestReleaseScratch(t *testing.T) {
	r := &idleChunks{chunks: [][]byte{
		[]byte("CONNECT\naccept-version:1.2\nhost:h\nheart-beat:0,0\n\n\x00"),
		[]byte("SEND\ndestination:/q\nx:1\n\nbody\x00"),
	}}
	p := NewParser(r, Limits{})
	r.p = p
	f, err := p.ReadFrame()
	requireNoError(t, err)
	requireEqual(t, f.Value("host"), "h")
	p.ReleaseScratch()
	requireEqual(t, p.offs == nil && p.hdrs == nil && p.f.Headers == nil, true)
	f, err = p.ReadFrame()
	requireNoError(t, err)
	requireEqual(t, f.Value("destination"), "/q")
	requireEqual(t, f.Value("x"), "1")
	requireEqual(t, string(f.Body), "body")
}

// When reads fill the buffer (more input waits), the parser moves to larger pooled buffers,
// so a stream of frames close to the buffer's size (4 KiB bodies) is not read one frame per
// read; frames stay intact across the moves.
func TestParserGrowsBufferOnFullReads(t *testing.T) {
	frame := []byte("SEND\ndestination:/queue/a\ncontent-length:4096\n\n")
	frame = append(append(frame, bytes.Repeat([]byte("x"), 4096)...), 0)
	const frames = 400
	r := &idleChunks{chunks: [][]byte{bytes.Repeat(frame, frames)}} // the socket always has more
	p := NewParser(r, Limits{})
	r.p = p
	for i := range frames {
		f, err := p.ReadFrame()
		requireNoError(t, err)
		if len(f.Body) != 4096 || f.Body[0] != 'x' || f.Body[4095] != 'x' {
			t.Fatalf("frame %d: body of %d bytes, want 4096 x", i, len(f.Body))
		}
	}
	reads := r.idleCalls + r.plain
	if reads*4 > frames {
		t.Fatalf("%d reads for %d frames of 4 KiB with input always waiting; want at most one per 4 frames", reads, frames)
	}
	if got := len(p.buf); p.buf != nil && got != idleBufBytes {
		t.Fatalf("buffer of %d bytes after full reads, want the largest pooled class (%d)", got, idleBufBytes)
	}
}

// After a burst grew the buffer, small reads step the pooled class back down, one class per
// idle read.
func TestParserShrinksBufferOnSmallReads(t *testing.T) {
	frame := []byte("SEND\ndestination:/queue/a\ncontent-length:4096\n\n")
	frame = append(append(frame, bytes.Repeat([]byte("x"), 4096)...), 0)
	small := []byte("SEND\ndestination:/q\n\nhi\x00")
	chunks := [][]byte{bytes.Repeat(frame, 100)}
	for range 8 {
		chunks = append(chunks, small)
	}
	r := &idleChunks{chunks: chunks}
	p := NewParser(r, Limits{})
	r.p = p
	for range 100 {
		_, err := p.ReadFrame()
		requireNoError(t, err)
	}
	grown := p.bufClass
	if grown < readBufClasses-1 && len(p.buf) != idleBufBytes {
		t.Fatalf("class %d after a burst of full reads, want the largest", grown)
	}
	for range 8 {
		f, err := p.ReadFrame()
		requireNoError(t, err)
		requireEqual(t, string(f.Body), "hi")
	}
	_, _ = p.ReadFrame() // EOF: releases the buffer of the last small read
	if p.bufClass != 0 {
		t.Fatalf("class %d after 8 small idle reads, want 0 (4 KiB)", p.bufClass)
	}
}
