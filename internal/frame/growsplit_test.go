package frame

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
)

// randomReads is an IdleReader over one byte stream that returns reads of random sizes (at
// most the buffer offered), sometimes finding no input first (the buffer goes back), so
// frames are split at every kind of boundary while the parser's pooled buffer grows and
// shrinks between its size classes.
type randomReads struct {
	rest []byte
	rnd  *rand.Rand
	max  int
}

func (r *randomReads) read(b []byte) (int, error) {
	if len(r.rest) == 0 {
		return 0, io.EOF
	}
	n := min(len(b), len(r.rest))
	if r.rnd.IntN(3) > 0 { // often a short read
		n = min(n, 1+r.rnd.IntN(r.max))
	}
	copy(b, r.rest[:n])
	r.rest = r.rest[n:]
	return n, nil
}

func (r *randomReads) Read(b []byte) (int, error) { return r.read(b) }

func (r *randomReads) ReadIdle(b IdleBuffer) (int, error) {
	if r.rnd.IntN(4) == 0 {
		b.Take()
		b.Put()
	}
	return r.read(b.Take())
}

// Frames whose sizes sit on every side of the pooled read buffer classes (4 to 64 KiB) and
// beyond, content-length bodies full of NULs, bodies without content-length, heart-beat EOLs
// between frames, all read in random splits: every frame comes out byte-exact, whatever
// growth, shrink and grow-on-full-read did to the buffer meanwhile.
func TestParserGrowthKeepsFramesIntactAcrossSplits(t *testing.T) {
	var sizes []int
	for c := range readBufClasses + 1 {
		edge := minBufBytes << c
		for _, d := range []int{-80, -60, -1, 0, 1, 37} {
			if edge+d > 0 {
				sizes = append(sizes, edge+d)
			}
		}
	}
	sizes = append(sizes, 0, 1, 100, 200_000)
	lim := Limits{MaxBodyBytes: 1 << 20}
	for seed := range uint64(40) {
		rnd := rand.New(rand.NewPCG(seed, 7))
		var stream []byte
		type want struct {
			dest string
			body []byte
		}
		var wants []want
		for i := range 120 {
			n := sizes[rnd.IntN(len(sizes))]
			body := make([]byte, n)
			withLen := rnd.IntN(2) == 0
			for j := range body {
				body[j] = byte('a' + (i+j)%26)
				if withLen && j%97 == 3 {
					body[j] = 0
				}
			}
			d := fmt.Sprintf("/queue/s%d-%d", seed, i)
			stream = append(stream, "SEND\ndestination:"+d+"\n"...)
			if withLen {
				stream = append(stream, fmt.Sprintf("content-length:%d\n", n)...)
			}
			stream = append(stream, '\n')
			stream = append(stream, body...)
			stream = append(stream, 0)
			for range rnd.IntN(3) {
				stream = append(stream, "\n\r\n"[rnd.IntN(2):]...)
			}
			wants = append(wants, want{d, body})
		}
		r := &randomReads{rest: stream, rnd: rnd, max: []int{1, 7, 3000, 70_000}[seed%4]}
		p := NewParser(r, lim)
		for i, w := range wants {
			f, err := p.ReadFrame()
			if err != nil {
				t.Fatalf("seed %d frame %d: %v", seed, i, err)
			}
			if got := f.Value("destination"); got != w.dest || !bytes.Equal(f.Body, w.body) {
				t.Fatalf("seed %d frame %d: destination %q body %d bytes, want %q and %d bytes (equal %v)", seed, i, got, len(f.Body), w.dest, len(w.body), bytes.Equal(f.Body, w.body))
			}
		}
		if _, err := p.ReadFrame(); err != io.EOF {
			t.Fatalf("seed %d: after the last frame %v, want EOF", seed, err)
		}
	}
}
