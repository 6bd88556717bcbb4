package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/titan-broker/titan/client"
)

// defaultSTOMP is the STOMP address send, subscribe and bench use when neither --stomp nor
// TITAN_STOMP is given; they then say so on stderr.
const defaultSTOMP = "localhost:61613"

// Environment variables of the STOMP client commands.
const (
	stompEnv    = "TITAN_STOMP"
	loginEnv    = "TITAN_LOGIN"
	passcodeEnv = "TITAN_PASSCODE"
)

// stompOptions are the connection flags shared by send, subscribe and bench.
type stompOptions struct {
	addr     string
	login    string
	passcode string
	vhost    string // CONNECT's host header ("": the address's host)
	tls      bool
	ca       string
	cert     string
	key      string
}

// stompFlags registers the connection flags on cmd.
func stompFlags(cmd *cobra.Command, o *stompOptions) {
	fl := cmd.Flags()
	fl.StringVar(&o.addr, "stomp", "", "STOMP address of the broker, host:port (env "+stompEnv+"; default "+defaultSTOMP+")")
	fl.StringVar(&o.login, "login", "", "login sent in CONNECT (env "+loginEnv+")")
	secretFlags(fl, &o.passcode, "passcode", passcodeEnv, "passcode sent in CONNECT,")
	fl.StringVar(&o.vhost, "vhost", "", "host header of CONNECT, the virtual host (default: the host of --stomp; RabbitMQ wants / or its vhost)")
	fl.BoolVar(&o.tls, "tls", false, "connect over TLS (implied by --ca, --cert)")
	fl.StringVar(&o.ca, "ca", "", "PEM file of the CA(s) that sign the broker's certificate (default: the system roots)")
	fl.StringVar(&o.cert, "cert", "", "PEM client certificate file, for brokers that verify clients (with --key)")
	fl.StringVar(&o.key, "key", "", "PEM private key file of --cert")
}

// resolve fills the address and credentials from the environment where no flag was given,
// and reports on stderr when the documented default address is used.
func (o *stompOptions) resolve(stderr io.Writer) {
	if o.addr == "" {
		o.addr = os.Getenv(stompEnv)
	}
	if o.addr == "" {
		o.addr = defaultSTOMP
		fmt.Fprintf(stderr, "titan: using the default STOMP address %s (set --stomp or %s)\n", defaultSTOMP, stompEnv)
	}
	if o.login == "" {
		o.login = os.Getenv(loginEnv)
	}
	if o.passcode == "" {
		o.passcode = os.Getenv(passcodeEnv)
	}
}

// clientOptions turns the flags into client options. Errors: unreadable or invalid PEM
// files, --cert without --key.
func (o *stompOptions) clientOptions() ([]client.Option, error) {
	var opts []client.Option
	if o.login != "" || o.passcode != "" {
		opts = append(opts, client.WithLogin(o.login, o.passcode))
	}
	if o.tls || o.ca != "" || o.cert != "" || o.key != "" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if o.ca != "" {
			pem, err := os.ReadFile(o.ca)
			if err != nil {
				return nil, fmt.Errorf("--ca: %w", err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("--ca %s holds no PEM certificate", o.ca)
			}
		}
		if (o.cert == "") != (o.key == "") {
			return nil, errors.New("--cert and --key go together")
		}
		if o.cert != "" {
			pair, err := tls.LoadX509KeyPair(o.cert, o.key)
			if err != nil {
				return nil, fmt.Errorf("--cert/--key: %w", err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		opts = append(opts, client.WithTLS(cfg))
	}
	return opts, nil
}

// dial resolves the flags and connects within timeout. A failure names the address, the
// step and the cause, and which flag to change.
func (o *stompOptions) dial(ctx context.Context, g *globalOptions, extra ...client.Option) (*client.Client, error) {
	opts, err := o.clientOptions()
	if err != nil {
		return nil, err
	}
	if o.vhost != "" {
		opts = append(opts, client.WithHost(o.vhost))
	}
	opts = append(opts, client.WithConnectTimeout(g.timeout))
	opts = append(opts, extra...)
	c, err := client.Dial(ctx, o.addr, opts...)
	if err != nil {
		var ce *client.ConnectError
		if errors.As(err, &ce) && (ce.Step == "dial" || ce.Step == "address") {
			return nil, fmt.Errorf("%w; use --stomp host:port", err)
		}
		return nil, err
	}
	return c, nil
}

// explainSendError adds what a person needs to a failed send: an ERROR about the frame's
// size names the body size.
func explainSendError(err error, bodyBytes int) error {
	var se *client.ServerError
	if errors.As(err, &se) && strings.Contains(strings.ToLower(se.Message), "too large") {
		return fmt.Errorf("the broker refused the message: its body of %d bytes is over the broker's limit (max-body-length): %w", bodyBytes, err)
	}
	return err
}

// headerFlags parses repeated --header k:v flags.
func parseHeaders(hs []string) ([][2]string, error) {
	out := make([][2]string, 0, len(hs))
	for _, h := range hs {
		k, v, ok := strings.Cut(h, ":")
		if !ok || k == "" {
			return nil, errBadHeader(h)
		}
		out = append(out, [2]string{k, v})
	}
	return out, nil
}
