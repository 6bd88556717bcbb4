package main

import "testing"

// The embedded NATS client port is set by --cluster-client-port or
// TITAN_CLUSTER_CLIENT_PORT (issue 27), the flag winning, like every serve setting.
func TestServeClusterClientPort(t *testing.T) {
	load := func(args ...string) int {
		t.Helper()
		cmd := newServeCmd()
		if err := cmd.ParseFlags(append([]string{"--cluster-name", "c", "--cluster-node", "a", "--cluster-listen", "127.0.0.1:16222",
			"--cluster-routes", "nats://127.0.0.1:16222"}, args...)); err != nil {
			t.Fatal(err)
		}
		var f serveFlags
		f.configPath = ""
		cfg, err := loadServeConfig(cmd, &f)
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Cluster.ClientPort
	}
	t.Setenv("TITAN_CONFIG", "")
	if got := load(); got != 0 {
		t.Errorf("default client port %d, want 0 (a free port)", got)
	}
	t.Setenv("TITAN_CLUSTER_CLIENT_PORT", "14222")
	if got := load(); got != 14222 {
		t.Errorf("TITAN_CLUSTER_CLIENT_PORT: client port %d, want 14222", got)
	}
	if got := load("--cluster-client-port", "24222"); got != 24222 {
		t.Errorf("--cluster-client-port: client port %d, want 24222 (the flag wins)", got)
	}
}
