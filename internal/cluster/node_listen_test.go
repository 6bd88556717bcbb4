package cluster_test

import (
	"context"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/cluster"
	"github.com/titan-broker/titan/internal/config"
	"github.com/titan-broker/titan/internal/testport"
)

// A node whose route or client port is taken fails at once with an error that names the
// setting and the address (nats-server would only log it and never become ready: the node
// used to wait 30 s and report "not ready for connections").
func TestStartNamesAPortInUse(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	addr := taken.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	free := "127.0.0.1:" + strconv.Itoa(testport.Free(t))
	clientPort, _ := strconv.Atoi(port)
	for _, tc := range []struct {
		name, want string
		cfg        config.Cluster
	}{
		{"route", "route listen " + addr, config.Cluster{Listen: addr}},
		{"client", "client port 127.0.0.1:" + port, config.Cluster{Listen: free, ClientPort: clientPort}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Name, cfg.NodeName, cfg.Replicas, cfg.Sync = "unit", "u0", 1, "always"
			cfg.StoreDir = filepath.Join(t.TempDir(), "js")
			start := time.Now()
			n, err := cluster.Start(context.Background(), cfg, 1<<20, nil)
			if err == nil {
				n.Close()
				t.Fatalf("started on a %s port in use", tc.name)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "address already in use") {
				t.Fatalf("error %q; want it to name %q and the bind error", err, tc.want)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Fatalf("failed after %v; want at once", took)
			}
		})
	}
}
