package frame

import (
	"strings"
	"testing"
)

// Issue #29: a malformed passcode line is reported without its content, in the ERROR and
// therefore in the log, for every malformation that echoes the line.
func TestMalformedPasscodeLineIsNotEchoed(t *testing.T) {
	const secret = "hunter2-secret"
	for name, in := range map[string]string{
		"bare CR":  "CONNECT\npasscode:" + secret + "\rx\n\n\x00",
		"NUL":      "CONNECT\nPasscode:" + secret + "\x00x\n\n\x00",
		"too long": "CONNECT\npasscode:" + secret + strings.Repeat("x", 2000) + "\n\n\x00",
	} {
		p := NewParser(strings.NewReader(in), Limits{MaxHeaderLineBytes: 1024})
		_, err := p.ReadFrame()
		if err == nil {
			t.Fatalf("%s: parsed", name)
		}
		if strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "value not shown") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
