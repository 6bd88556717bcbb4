package client_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/titan-broker/titan/client"
)

// Connect with credentials, TLS and reconnects, send with a receipt, and consume with
// individual acknowledgements.
func Example() {
	pem, err := os.ReadFile("ca.pem")
	if err != nil {
		log.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, "broker.example.com:61614",
		client.WithLogin("app", os.Getenv("TITAN_PASSCODE")),
		client.WithTLS(&tls.Config{RootCAs: pool}),
		client.WithReconnect(client.ReconnectPolicy{MaxAttempts: 20}))
	if err != nil {
		log.Fatal(err) // names the address, the step and the cause
	}
	defer c.Close()

	if _, err := c.Send(ctx, "default", "/queue/orders", []byte(`{"id":1}`), client.WithContentType("application/json")); err != nil {
		var se *client.ServerError
		if errors.As(err, &se) {
			log.Fatalf("refused: %s", se.Message)
		}
		log.Fatal(err)
	}
	_, err = c.Subscribe("default", "/queue/orders", func(m *client.Message) {
		fmt.Printf("%s\n", m.Body)
		_ = m.Ack()
	}, client.WithAck(client.AckClientIndividual), client.WithPrefetch(100))
	if err != nil {
		log.Fatal(err)
	}
}

// A responder and a requester of Titan's request/response pattern.
func ExampleClient_Request() {
	ctx := context.Background()
	c, err := client.Dial(ctx, "localhost:61613")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	// The responder: every request on /query/prices gets an answer on its reply-to.
	_, err = c.Subscribe("default", "/query/prices", func(m *client.Message) {
		_ = c.Reply(ctx, m, []byte("42.0"))
	})
	if err != nil {
		log.Fatal(err)
	}
	// The requester: ctx's deadline is the broker-side timeout too.
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := c.Request(rctx, "default", "/query/prices", []byte("gold"))
	var re *client.RequestError
	switch {
	case errors.As(err, &re):
		log.Printf("not answered: %s", re.Reason) // "timeout", "no responder"
	case err != nil:
		log.Fatal(err)
	default:
		fmt.Printf("%s\n", resp.Body)
	}
}
