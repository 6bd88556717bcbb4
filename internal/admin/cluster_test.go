package admin_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/titan-broker/titan/internal/admin"
)

// In single-node mode the cluster endpoint answers mode "single" with this node alone, and
// /metrics carries no node label.
func TestClusterSingleNode(t *testing.T) {
	_, a := start(t, nil)
	st, err := a.Cluster(context.Background())
	requireNoError(t, err)
	requireEqual(t, st.Mode, admin.ClusterModeSingle, "mode")
	requireEqual(t, len(st.Nodes), 1, "nodes")
	if !st.Nodes[0].Up || !st.Nodes[0].Self || st.Streams == nil || st.Nodes[0].Leads == nil {
		t.Fatalf("single-node status %+v", st)
	}

	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + admin.PathCluster)
	requireNoError(t, err)
	defer resp.Body.Close()
	requireEqual(t, resp.StatusCode, http.StatusOK, "status")
	var got map[string]any
	requireNoError(t, json.NewDecoder(resp.Body).Decode(&got))
	requireEqual(t, got["mode"], any("single"), "JSON mode")
	if _, ok := got["streams"].([]any); !ok {
		t.Fatalf("streams is not a JSON array: %v", got)
	}

	resp, err = http.Get(srv.URL + admin.PathMetrics)
	requireNoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	requireNoError(t, err)
	if strings.Contains(string(body), `node="`) || strings.Contains(string(body), "titan_cluster_") {
		t.Fatalf("single-node /metrics carries cluster series or node labels")
	}
}
