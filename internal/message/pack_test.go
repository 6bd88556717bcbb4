package message

import (
	"bytes"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/titan-broker/titan/internal/frame"
)

// TestPackMatchesLazyEncoding checks that a packed message has the same fields as the parts
// it was built from (raw, unescaped strings; the body byte-exact) and that its prebuilt 1.2
// tail, and the 1.0 and 1.1 tails encoded on demand, equal those of a message built field by
// field — for escaped strings, headers 1.2 cannot carry, more headers than fit inline, and
// bodies beyond the largest size class.
func TestPackMatchesLazyEncoding(t *testing.T) {
	many := make([]frame.Header, 9)
	for i := range many {
		many[i] = frame.Header{Key: fmt.Sprintf("h%d", i), Value: strings.Repeat("v", i)}
	}
	cases := []struct {
		name    string
		group   string
		dest    string
		headers []frame.Header
		body    []byte
	}{
		{"plain", "default", "/topic/a", []frame.Header{{Key: "content-type", Value: "text/plain"}}, []byte("hello")},
		{"empty", "", "/queue/a", nil, nil},
		{"empty body", "default", "/queue/a", nil, []byte{}},
		{"group", "g-1", "/queue/a/b", nil, []byte("x")},
		{"escaped", "default", "/topic/a", []frame.Header{{Key: "k:1", Value: "a\\b\nc\rd"}, {Key: "plain", Value: "v"}}, []byte("b")},
		{"not representable", "default", "/topic/a", []frame.Header{{Key: "nul", Value: "a\x00b"}, {Key: "after", Value: "1"}}, []byte("b")},
		{"empty key", "default", "/topic/a", []frame.Header{{Key: "", Value: "x"}, {Key: "k", Value: ""}}, []byte("b")},
		{"three headers", "default", "/topic/a", many[:3], []byte("b")},
		{"four headers", "default", "/topic/a", many[:4], []byte("b")},
		{"five headers", "default", "/topic/a", many[:5], []byte("b")},
		{"many headers", "default", "/topic/a", many, []byte("b")},
		{"size classes", "default", "/topic/a", nil, bytes.Repeat([]byte{'z'}, 3000)},
		{"large", "default", "/topic/a", []frame.Header{{Key: "content-type", Value: "x"}}, bytes.Repeat([]byte{0, 1, 2}, 5000)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := Parts{IDPrefix: "titan:x", Group: c.group, Destination: []byte(c.dest),
				Headers: slices.Clone(c.headers), Body: slices.Clone(c.body),
				TimestampMs: 1, ExpiresMs: 2, DeliverAtMs: 3, Persistent: true}
			m := Pack(&p)
			// Pack keeps nothing of p: scribble over it.
			for i := range p.Destination {
				p.Destination[i] = '#'
			}
			for i := range p.Body {
				p.Body[i] = '#'
			}
			wantGroup := c.group
			if wantGroup == "" {
				wantGroup = "default"
			}
			if !strings.HasPrefix(m.ID, "titan:x-") || m.Group != wantGroup || m.Destination != c.dest ||
				!bytes.Equal(m.Body, c.body) || (m.Body == nil) != (c.body == nil) ||
				!slices.Equal(m.Headers, c.headers) || m.TimestampMs != 1 || m.ExpiresMs != 2 || m.DeliverAtMs != 3 || !m.Persistent {
				t.Fatalf("packed %+v from %+v", m, c)
			}
			ref := &Message{ID: m.ID, Group: m.Group, Destination: c.dest, Headers: c.headers, Body: c.body}
			for _, v := range []frame.Version{frame.V10, frame.V11, frame.V12} {
				got, gd := m.Shared(v)
				want, wd := ref.Shared(v)
				if !bytes.Equal(got, want) || gd != wd {
					t.Fatalf("v%d tail %q (%d dropped), want %q (%d)", v, got, gd, want, wd)
				}
			}
		})
	}
}

// TestPackAllocs checks that a message with a small body and few headers is one allocation.
func TestPackAllocs(t *testing.T) {
	p := Parts{IDPrefix: "titan", Group: "default", Destination: []byte("/topic/a"),
		Headers: []frame.Header{{Key: "content-type", Value: "text/plain"}}, Body: make([]byte, 1000)}
	if n := testing.AllocsPerRun(100, func() { Pack(&p) }); n != 1 {
		t.Fatalf("Pack: %.1f allocations, want 1", n)
	}
}

// TestPackBytes holds the memory a small queued message takes: the message, its headers and
// its bytes in one block whose header room matches the headers it has (none, one, two or
// four), with no room for the STOMP 1.0 and 1.1 tails that only 1.0 and 1.1 subscribers
// need. Measured as the heap bytes allocated per Pack (runtime.MemStats.TotalAlloc) over many
// packs of a 100-byte body to a short destination.
func TestPackBytes(t *testing.T) {
	body := make([]byte, 100)
	for _, c := range []struct {
		headers []frame.Header
		max     uint64
	}{
		{nil, 384},
		{[]frame.Header{{Key: "content-type", Value: "text/plain"}}, 448},
		{[]frame.Header{{Key: "content-type", Value: "text/plain"}, {Key: "correlation-id", Value: "c-1"}}, 480},
	} {
		p := Parts{IDPrefix: "titan-x", Group: "default", Destination: []byte("/queue/orders"), Headers: c.headers, Body: body}
		const n = 1000
		per := ^uint64(0)
		for range 3 { // the least of three rounds: other goroutines allocate too (more under -race)
			keep := make([]*Message, 0, n)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for range n {
				keep = append(keep, Pack(&p))
			}
			runtime.ReadMemStats(&after)
			per = min(per, (after.TotalAlloc-before.TotalAlloc)/n)
			runtime.KeepAlive(keep)
		}
		// The allocator's classes here are 32 bytes apart: up to 15 bytes of noise per
		// message is tolerated, a block one class larger is not.
		if per > c.max+15 {
			t.Errorf("%d headers: %d bytes per packed message, want at most %d", len(c.headers), per, c.max)
		}
	}
}

// TestSharedConcurrentLegacyVersions checks that subscribers of every version reading one
// message's tail at once all get the same encoding, made once (run with -race).
func TestSharedConcurrentLegacyVersions(t *testing.T) {
	m := Pack(&Parts{IDPrefix: "p", Group: "default", Destination: []byte("/topic/t"),
		Headers: []frame.Header{{Key: "k", Value: "a:b"}}, Body: []byte("x")})
	const readers = 16
	tails := make([][3][]byte, readers)
	var wg sync.WaitGroup
	for r := range readers {
		wg.Go(func() {
			for i, v := range []frame.Version{frame.V11, frame.V10, frame.V12} {
				tails[r][i], _ = m.Shared(v)
			}
		})
	}
	wg.Wait()
	for r := range readers {
		for i := range 3 {
			if unsafe.SliceData(tails[r][i]) != unsafe.SliceData(tails[0][i]) {
				t.Fatalf("reader %d got a different tail for version index %d", r, i)
			}
		}
	}
	if !bytes.Contains(tails[0][0], []byte(`k:a\cb`)) {
		t.Fatalf("1.1 tail %q does not escape the colon", tails[0][0])
	}
	if !bytes.Contains(tails[0][1], []byte("k:a:b\n")) {
		t.Fatalf("1.0 tail %q is not the raw header (1.0 has no escaping)", tails[0][1])
	}
}

// BenchmarkPack measures building a message with a 100-byte body and one header.
func BenchmarkPack(b *testing.B) {
	p := Parts{IDPrefix: "titan", Group: "default", Destination: []byte("/queue/orders"),
		Headers: []frame.Header{{Key: "content-type", Value: "text/plain"}}, Body: make([]byte, 100)}
	b.ReportAllocs()
	for b.Loop() {
		Pack(&p)
	}
}

// TestPackEverySizeClass checks the tail and body of packed messages whose tails fall in
// every size class and beyond the largest.
func TestPackEverySizeClass(t *testing.T) {
	for n := 0; n < 5000; n += 37 {
		body := bytes.Repeat([]byte{'b'}, n)
		m := Pack(&Parts{IDPrefix: "p", Group: "g", Destination: []byte("/queue/q"),
			Headers: []frame.Header{{Key: "k", Value: "v"}}, Body: body})
		ref := &Message{ID: m.ID, Group: "g", Destination: "/queue/q", Headers: []frame.Header{{Key: "k", Value: "v"}}, Body: body}
		got, _ := m.Shared(frame.V12)
		want, _ := ref.Shared(frame.V12)
		if !bytes.Equal(got, want) || !bytes.Equal(m.Body, body) {
			t.Fatalf("body of %d bytes: tail %q, want %q", n, got, want)
		}
	}
}

// TestRebuilt checks that a rebuilt message keeps everything but its headers.
func TestRebuilt(t *testing.T) {
	m := Pack(&Parts{IDPrefix: "titan", Group: "g", Destination: []byte("/queue/a"),
		Headers: []frame.Header{{Key: "a", Value: "1"}}, Body: []byte("body"), TimestampMs: 1, ExpiresMs: 2, DeliverAtMs: 3, Persistent: true})
	m.Sequence = 7
	r := Rebuilt(m, []frame.Header{{Key: "a", Value: "1"}, {Key: "correlation-id", Value: m.ID}})
	if r.ID != m.ID || r.Group != "g" || r.Destination != "/queue/a" || string(r.Body) != "body" || r.TimestampMs != 1 ||
		r.ExpiresMs != 2 || r.DeliverAtMs != 3 || !r.Persistent || r.Sequence != 7 || len(r.Headers) != 2 {
		t.Fatalf("rebuilt %+v from %+v", r, m)
	}
	if v, _ := r.Header("correlation-id"); v != m.ID {
		t.Fatalf("correlation-id %q", v)
	}
	tail, _ := r.Shared(frame.V12)
	if !bytes.Contains(tail, []byte("correlation-id:"+m.ID+"\n")) {
		t.Fatalf("tail %q lacks the new header", tail)
	}
}
