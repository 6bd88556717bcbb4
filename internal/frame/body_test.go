package frame

import (
	"errors"
	"testing"
)

func TestCheckBody(t *testing.T) {
	for c := CmdConnect; c < numCommands; c++ {
		allowed := c == CmdSend || c == CmdMessage || c == CmdError
		if c.BodyAllowed() != allowed {
			t.Errorf("%s.BodyAllowed() = %v", c, c.BodyAllowed())
		}
		for _, tc := range []struct {
			body string
			bad  bool
		}{{"", false}, {"\n", false}, {"\r\n\r\n", false}, {"x", !allowed}, {"\nx", !allowed}, {"\x00", !allowed}} {
			f := &Frame{Command: c, Headers: []Header{{Key: HdrReceipt, Value: "r"}}, Body: []byte(tc.body)}
			pe := CheckBody(f)
			if (pe != nil) != tc.bad {
				t.Errorf("%s with body %q: CheckBody = %v, want refusal %v", c, tc.body, pe, tc.bad)
				continue
			}
			if pe != nil && (pe.Reason != "body not allowed" || pe.ReceiptID != "r" || !pe.Fatal || !errors.Is(pe, ErrBodyNotAllowed)) {
				t.Errorf("%s: %+v", c, pe)
			}
		}
	}
}

// BenchmarkCheckBody is the per-frame cost of the body rule on the read path.
func BenchmarkCheckBody(b *testing.B) {
	send := &Frame{Command: CmdSend, Body: make([]byte, 1024)}
	ack := &Frame{Command: CmdAck, Headers: []Header{{Key: HdrID, Value: "1"}}}
	b.ReportAllocs()
	for b.Loop() {
		if CheckBody(send) != nil || CheckBody(ack) != nil {
			b.Fatal("refused")
		}
	}
}
