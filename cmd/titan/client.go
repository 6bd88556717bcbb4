package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/titan-broker/titan/internal/admin"
)

// apiClient calls a broker's monitor API. One per command run.
type apiClient struct {
	base  *url.URL // scheme://host[:port][/prefix], no trailing slash
	token string
	user  string // HTTP Basic user (wins over token when set)
	pass  string
	http  *http.Client
	g     *globalOptions
}

// newClient builds the client for --addr, --token and --timeout. An address without a scheme
// ("localhost:7777") means http.
func (g *globalOptions) newClient() (*apiClient, error) {
	raw := strings.TrimSpace(g.addr)
	if raw == "" {
		return nil, errors.New("--addr is empty (use e.g. --addr http://localhost:7777)")
	}
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("--addr %q is not a monitor API address (use e.g. --addr http://localhost:7777)", g.addr)
	}
	if g.addrDefaulted && g.stderr != nil {
		fmt.Fprintf(g.stderr, "titan: using the default monitor API address %s (set --addr or %s)\n", g.addr, addrEnv)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	tr := http.DefaultTransport.(*http.Transport).Clone()
	user, pass := g.credentials()
	return &apiClient{base: u, token: g.tokenValue(), user: user, pass: pass, http: &http.Client{Timeout: g.timeout, Transport: tr}, g: g}, nil
}

// close releases the client's idle connections. Call it when the command is done.
func (c *apiClient) close() { c.http.CloseIdleConnections() }

// addr is the address shown in messages.
func (c *apiClient) addr() string { return c.base.String() }

// apiError is an error answer of the monitor API.
type apiError struct {
	status  int
	code    string // admin.Code*
	message string
}

func (e *apiError) Error() string { return e.message }

// do sends method path?query with body (JSON-encoded when non-nil) and decodes a 2xx answer
// into out (when non-nil). It returns the status. Errors are one line: unreachable broker,
// timeout, an apiError for a JSON error answer, or a note that --addr is not a Titan API.
func (c *apiClient) do(ctx context.Context, method, path string, query url.Values, body, out any) (int, error) {
	u := *c.base
	u.Path += path
	u.RawQuery = query.Encode()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c.authorize(req)
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, c.transportError(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("reading the answer from %s: %v", c.addr(), err)
	}
	isJSON := strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json")
	if resp.StatusCode >= 300 {
		var er admin.ErrorResponse
		if !isJSON || json.Unmarshal(data, &er) != nil || er.Error == "" {
			return resp.StatusCode, fmt.Errorf("unexpected answer from %s: HTTP %s (is --addr the Titan monitor API?)", c.addr(), resp.Status)
		}
		if resp.StatusCode == http.StatusUnauthorized {
			return resp.StatusCode, c.authError()
		}
		return resp.StatusCode, &apiError{status: resp.StatusCode, code: er.Code, message: er.Error}
	}
	if out != nil {
		if !isJSON {
			return resp.StatusCode, fmt.Errorf("unexpected answer from %s: %s is not JSON (is --addr the Titan monitor API?)", c.addr(), resp.Header.Get("Content-Type"))
		}
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("unexpected answer from %s: %v", c.addr(), err)
		}
	}
	return resp.StatusCode, nil
}

func (c *apiClient) authError() error {
	msg := "the monitor API at " + c.addr() + " rejected the token (check --token-file or " + tokenEnv + ")"
	switch {
	case c.user != "":
		msg = "the monitor API at " + c.addr() + " refused user " + c.user + " (check --user and --password-file, or " + userEnv + " and " + passwordEnv + ")"
	case c.token == "":
		msg = "the monitor API at " + c.addr() + " needs credentials: pass --user and --password-file (or set " + userEnv + " and " + passwordEnv + "), or --token-file (" + tokenEnv + ")"
	}
	return &apiError{status: http.StatusUnauthorized, code: admin.CodeUnauthorized, message: msg}
}

// transportError turns a failed round trip into one actionable line.
func (c *apiClient) transportError(err error) error {
	var ne net.Error
	var dnsErr *net.DNSError
	switch {
	case errors.Is(err, context.Canceled):
		return errors.New("interrupted")
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("cannot reach the Titan monitor API at %s (connection refused): is the broker running? Use --addr to point at another broker", c.addr())
	case errors.As(err, &dnsErr):
		return fmt.Errorf("cannot resolve %s (%s): check --addr", c.base.Hostname(), dnsErr.Err)
	case errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return fmt.Errorf("no answer from the Titan monitor API at %s within %s: check --addr, or raise --timeout", c.addr(), c.g.timeout)
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return fmt.Errorf("cannot reach the Titan monitor API at %s (%v): check --addr", c.addr(), oe.Err)
	}
	return fmt.Errorf("cannot reach the Titan monitor API at %s: %v (check --addr)", c.addr(), err)
}

// getView GETs path (with query q) from the monitor API into v, and with --output json
// prints v and reports printed; otherwise the caller prints its table. Errors: those of
// newClient and apiClient.do (the API's answer as an *apiError).
func getView(cmd *cobra.Command, g *globalOptions, path string, q url.Values, v any) (printed bool, err error) {
	c, err := g.newClient()
	if err != nil {
		return false, err
	}
	defer c.close()
	if _, err := c.do(cmd.Context(), http.MethodGet, path, q, nil, v); err != nil {
		return false, err
	}
	if g.output == outputJSON {
		return true, printJSON(cmd.OutOrStdout(), v)
	}
	return false, nil
}
