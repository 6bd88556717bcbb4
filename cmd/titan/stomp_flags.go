package main

import (
	"os"

	"github.com/spf13/cobra"
)

// defaultSTOMP is the STOMP address send, subscribe and bench use without --stomp.
const defaultSTOMP = "localhost:61613"

// stompAddr is the --stomp flag shared by the STOMP client commands (env TITAN_STOMP).
func stompAddrFlag(cmd *cobra.Command, dst *string) {
	def := defaultSTOMP
	if v := os.Getenv("TITAN_STOMP"); v != "" {
		def = v
	}
	cmd.Flags().StringVar(dst, "stomp", def, "STOMP address of the broker, host:port (env TITAN_STOMP)")
}

// headerFlags parses repeated --header k:v flags.
func parseHeaders(hs []string) ([][2]string, error) {
	out := make([][2]string, 0, len(hs))
	for _, h := range hs {
		k, v, ok := cutColon(h)
		if !ok || k == "" {
			return nil, errBadHeader(h)
		}
		out = append(out, [2]string{k, v})
	}
	return out, nil
}

func cutColon(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == ':' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}
