package e2e

import (
	"encoding/hex"
	"slices"
	"testing"
)

var versions = []string{"1.0", "1.1", "1.2"}

// Each client connects asking for exactly one version; CONNECTED must carry that version.
func TestConnectNegotiatesEachVersion(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))
	forEachClient(t, func(t *testing.T, c stompClient) {
		for _, v := range versions {
			t.Run(v, func(t *testing.T) {
				var out struct {
					Version *string `json:"version"`
					Server  *string `json:"server"`
					Session *string `json:"session"`
				}
				c.run(t, b, "connect", map[string]any{"version": v}, &out)
				if out.Version == nil {
					t.Fatalf("CONNECTED has no version header, want %s", v)
				}
				checkEqual(t, v, *out.Version, "CONNECTED version")
				if out.Session == nil || *out.Session == "" {
					t.Errorf("CONNECTED has no session header")
				}
				if out.Server == nil || *out.Server == "" {
					t.Errorf("CONNECTED has no server header")
				}
			})
		}
	})
}

// A body holding every byte value, NUL included, goes through SEND and comes back in MESSAGE
// byte for byte, on every protocol version.
func TestBinaryBodyRoundTripsByteExact(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	want := hex.EncodeToString(all)
	forEachClient(t, func(t *testing.T, c stompClient) {
		for _, v := range versions {
			t.Run(v, func(t *testing.T) {
				var out struct {
					SentHex       string  `json:"sent_hex"`
					ReceivedHex   string  `json:"received_hex"`
					ContentLength *string `json:"content_length"`
				}
				c.run(t, b, "binary", map[string]any{"version": v, "dest": "/queue/binary-" + c.short + "-" + v}, &out)
				requireEqual(t, want, out.SentHex, "the client sent a different body than intended")
				if out.ReceivedHex != want {
					t.Errorf("body changed in transit:\nsent     %s\nreceived %s", want, out.ReceivedHex)
				}
				if out.ContentLength == nil || *out.ContentLength != "256" {
					t.Errorf("MESSAGE content-length = %v, want 256", out.ContentLength)
				}
			})
		}
	})
}

// SEND, SUBSCRIBE and DISCONNECT that carry a receipt header are each answered by a RECEIPT
// with that receipt-id (the DISCONNECT one before the connection closes).
func TestReceiptsForSendSubscribeDisconnect(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))
	forEachClient(t, func(t *testing.T, c stompClient) {
		for _, v := range versions {
			t.Run(v, func(t *testing.T) {
				var out struct {
					Receipts []string `json:"receipts"`
				}
				c.run(t, b, "receipts", map[string]any{"version": v, "dest": "/queue/receipts-" + c.short + "-" + v}, &out)
				for _, id := range []string{"r-send", "r-sub", "r-disc"} {
					if n := count(out.Receipts, id); n != 1 {
						t.Errorf("RECEIPT %s arrived %d times, want once (receipts: %q)", id, n, out.Receipts)
					}
				}
			})
		}
	})
}

func count[T comparable](s []T, v T) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
