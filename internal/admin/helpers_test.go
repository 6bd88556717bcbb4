package admin_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/titan-broker/titan/internal/admin"
	"github.com/titan-broker/titan/internal/broker"
	"github.com/titan-broker/titan/internal/brokertest"
	"github.com/titan-broker/titan/internal/config"
	"github.com/titan-broker/titan/internal/testwait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func requireNoError(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

func requireEqual[T comparable](t testing.TB, got, want T, what string) {
	t.Helper()
	if got != want {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

// testConfig is config.Default() with free ports on loopback and the memory store.
func testConfig() config.Config {
	c := brokertest.DefaultTestConfig()
	c.Servers[0].Port = 0
	c.Monitor.Port = 0
	c.Store.Type = "memory"
	return c
}

// start runs a real broker (port 0, memory store) after mutate edits its config.
func start(t *testing.T, mutate func(*config.Config), opts ...broker.Options) (*broker.Broker, *admin.Admin) {
	t.Helper()
	c := testConfig()
	if mutate != nil {
		mutate(&c)
	}
	b := brokertest.Run(t, c, opts...)
	return b, b.Admin()
}

// requireCode fails unless err is an *admin.Error with code and the sentinel.
func requireCode(t testing.TB, err error, code string, sentinel error) *admin.Error {
	t.Helper()
	var ae *admin.Error
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T) is not an *admin.Error", err, err)
	}
	requireEqual(t, ae.Code, code, "code")
	if sentinel != nil && !errors.Is(err, sentinel) {
		t.Fatalf("error %v does not wrap %v", err, sentinel)
	}
	return ae
}

// eventually polls cond until it holds or total elapses (testwait.Eventually).
func eventually(t testing.TB, total time.Duration, cond func() bool) {
	t.Helper()
	testwait.Eventually(t, total, "condition", cond)
}

func ptr[T any](v T) *T { return &v }

// httpClient is a client whose idle connections are closed at cleanup (goleak).
func httpClient(t *testing.T) *http.Client {
	c := &http.Client{}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decoding %s: %v", r.body, err)
	}
}

func (r response) errorBody(t testing.TB) admin.ErrorResponse {
	t.Helper()
	var e admin.ErrorResponse
	r.decode(t, &e)
	if e.Error == "" {
		t.Fatalf("error body without message: %s", r.body)
	}
	return e
}

// call sends method url with an optional body and header pairs.
func call(t *testing.T, c *http.Client, method, url, body string, hdrs ...string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	requireNoError(t, err)
	for i := 0; i+1 < len(hdrs); i += 2 {
		req.Header.Set(hdrs[i], hdrs[i+1])
	}
	resp, err := c.Do(req)
	requireNoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	requireNoError(t, err)
	return response{status: resp.StatusCode, header: resp.Header, body: data}
}
