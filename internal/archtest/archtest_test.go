package archtest

import (
	"bytes"
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// pkg is what `go list -json` says about one package (non-test imports).
type pkg struct {
	ImportPath string
	Imports    []string
}

// graph returns every package of the module with its direct imports, relative to Module.
func graph(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", Module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	g := map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		rel, ok := relative(p.ImportPath)
		if !ok {
			continue
		}
		var imps []string
		for _, imp := range p.Imports {
			if r, ok := relative(imp); ok {
				imps = append(imps, r)
			}
		}
		g[rel] = imps
	}
	return g
}

// relative strips Module from a path of the module ("" is the module root).
func relative(path string) (string, bool) {
	if path == Module {
		return "", true
	}
	rel, ok := strings.CutPrefix(path, Module+"/")
	return rel, ok
}

func matches(pattern, path string) bool {
	if pattern == "..." {
		return true
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == base || strings.HasPrefix(path, base+"/")
	}
	return path == pattern
}

// violations checks r over g and returns one line per offending import chain.
func violations(g map[string][]string, r Rule) []string {
	var out []string
	for _, from := range r.From {
		if _, ok := g[from]; !ok {
			out = append(out, "rule names an unknown package "+from+": "+r.Name)
			continue
		}
		// Breadth-first over the imports, remembering how each package was reached.
		via := map[string]string{from: ""}
		queue := []string{from}
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			for _, imp := range g[p] {
				if _, seen := via[imp]; seen {
					continue
				}
				via[imp] = p
				if forbidden(r, imp) {
					out = append(out, chain(via, imp)+"\n\trule: "+r.Name)
					continue // report the first edge into a forbidden package, not beyond
				}
				queue = append(queue, imp)
			}
		}
	}
	slices.Sort(out)
	return out
}

func forbidden(r Rule, p string) bool {
	for _, a := range r.Allowed {
		if matches(a, p) {
			return false
		}
	}
	for _, f := range r.Forbidden {
		if matches(f, p) {
			return true
		}
	}
	return false
}

// chain renders the import path that reached p: "a imports b imports p".
func chain(via map[string]string, p string) string {
	var path []string
	for x := p; x != ""; x = via[x] {
		path = append(path, x)
	}
	slices.Reverse(path)
	return "import rule violated: " + strings.Join(path, " imports ")
}

// TestImportRules fails when the module's import graph breaks a rule of Rules.
func TestImportRules(t *testing.T) {
	g := graph(t)
	for _, r := range Rules {
		for _, v := range violations(g, r) {
			t.Error(v)
		}
	}
}

// TestRulesCatchAViolation checks the checker itself on a graph with bad edges.
func TestRulesCatchAViolation(t *testing.T) {
	g := map[string][]string{
		"internal/frame":      {"internal/dest"},
		"internal/dest":       nil,
		"internal/router":     {"internal/delivery"},
		"internal/delivery":   {"internal/event"},
		"internal/event":      nil,
		"internal/config":     {"internal/address"},
		"internal/address":    {"internal/dest"},
		"internal/transport":  nil,
		"internal/session":    nil,
		"internal/pointqueue": nil,
		"internal/eventlog":   nil,
		"internal/cluster":    nil,
		"internal/rpc":        nil,
		"internal/selector":   nil,
		"internal/slotcache":  {"internal/dest"},
		// A cluster pattern reaching another one, and the pull loop reaching a pattern.
		"internal/cluster/events":        {"internal/cluster", "internal/cluster/queues"},
		"internal/cluster/queues":        {"internal/cluster", "internal/cluster/pull"},
		"internal/cluster/logs":          {"internal/cluster/pull"},
		"internal/cluster/requests":      {"internal/rpc"},
		"internal/cluster/pull":          {"internal/cluster/logs"},
		"internal/cluster/pipeline":      {"internal/cluster"},
		"internal/cluster/status":        {"internal/cluster"},
		"internal/cluster/durables":      {"internal/topicsub"},
		"internal/admission":             nil,
		"internal/admin":                 nil,
		"internal/topicsub":              nil,
		"internal/lockorder":             nil,
		"internal/delivery/deliverytest": nil,
		// The router's refusal errors, a leaf.
		"internal/router/refusal": nil,
	}
	var all []string
	for _, r := range Rules {
		all = append(all, violations(g, r)...)
	}
	want := []string{
		"import rule violated: internal/frame imports internal/dest\n\trule: frame imports nothing of ours",
		"import rule violated: internal/slotcache imports internal/dest\n\trule: slotcache imports nothing of ours",
		"import rule violated: internal/router imports internal/delivery imports internal/event\n\trule: the router imports no adapter (pattern implementations, store implementations, admin, broker)",
		"import rule violated: internal/cluster/events imports internal/cluster/queues\n\trule: cluster pattern packages import each other only through declared ports (they may wrap a single-node pattern)",
		"import rule violated: internal/cluster/queues imports internal/cluster/pull imports internal/cluster/logs\n\trule: cluster pattern packages import each other only through declared ports (they may wrap a single-node pattern)",
		"import rule violated: internal/cluster/pull imports internal/cluster/logs\n\trule: the cluster's shared packages (node, pull loop) reach no pattern, pipeline or status",
	}
	if !slices.Equal(all, want) {
		t.Fatalf("violations:\n%s\nwant:\n%s", strings.Join(all, "\n"), strings.Join(want, "\n"))
	}
}
