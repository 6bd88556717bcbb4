package frame

import (
	"testing"
)

// smallSend is a typical client SEND: a few headers, one escaped, and a short body.
const smallSend = "SEND\ndestination:/queue/orders\ncontent-type:text/plain\ncontent-length:11\n" +
	"receipt:42\nnote:a\\cb\n\nhello world\x00\n"

func TestAllocsParseSmallSend(t *testing.T) {
	p := NewParser(&repeatReader{data: []byte(smallSend)}, Limits{})
	var err error
	read := func() {
		var f *Frame
		if f, err = p.ReadFrame(); err == nil && (f.Command != CmdSend || string(f.Body) != "hello world" || f.Value("note") != "a:b") {
			t.Fatalf("unexpected frame %v", f)
		}
	}
	for range 1000 { // reach steady state: header slices grown, buffer wrapped
		read()
	}
	allocs := testing.AllocsPerRun(1000, read)
	requireNoError(t, err)
	requireEqual(t, allocs, 0.0)
}

func TestAllocsAppendMessage(t *testing.T) {
	f := fr(CmdMessage, "hello world",
		"subscription", "0",
		"message-id", "12345",
		"destination", "/queue/orders",
		"content-type", "text/plain",
		"content-length", "11",
		"note", "a:b",
	)
	buf := make([]byte, 0, 1024)
	allocs := testing.AllocsPerRun(1000, func() {
		buf, _ = AppendFrame(buf[:0], f, V12)
		buf = AppendContentLength(buf, 11)
		buf, _ = AppendHeader(buf, HdrAck, "a:1", V12, false)
	})
	requireEqual(t, allocs, 0.0)
}

func TestAllocsClone(t *testing.T) {
	p := NewParser(&repeatReader{data: []byte(smallSend)}, Limits{})
	f, err := p.ReadFrame()
	requireNoError(t, err)
	allocs := testing.AllocsPerRun(100, func() { _ = f.Clone() })
	requireEqual(t, allocs, 2.0) // one buffer for every byte, the header slice (Clone inlines: the Frame stays on the stack here)
}
