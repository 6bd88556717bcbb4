package main

import (
	"context"
	"testing"
	"time"

	"github.com/titan-broker/titan/client"
)

func TestDurableListAndDelete(t *testing.T) {
	b, addr := startBroker(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, b.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	live, err := c.Subscribe("", "/events-store/orders", func(*client.Message) {}, client.WithDurableName("billing"))
	if err != nil {
		t.Fatal(err)
	}
	off, err := c.Subscribe("", "/events-store/orders", func(*client.Message) {}, client.WithDurableName("audit"))
	if err != nil {
		t.Fatal(err)
	}
	if err := off.Unsubscribe(); err != nil {
		t.Fatal(err)
	}

	r := run(t, "--addr", addr, "durable", "list").requireOK(t)
	requireContains(t, r.stdout, "NAME", "audit", "offline", "billing", "live", "/events-store/orders")
	run(t, "--addr", addr, "durable", "delete", "/events-store/orders", "billing").
		requireFail(t, "titan: durable subscription billing on /events-store/orders is in use by a live subscription; close it first\n")
	r = run(t, "--addr", addr, "durable", "delete", "/events-store/orders", "audit").requireOK(t)
	requireEqual(t, r.stdout, "deleted durable subscription audit of /events-store/orders (group default)\n", "stdout")
	run(t, "--addr", addr, "durable", "delete", "/events-store/orders", "audit").
		requireFail(t, "titan: no durable subscription audit on /events-store/orders\n")
	run(t, "--addr", addr, "durable", "delete", "/events-store/orders").
		requireFail(t, "titan: titan durable delete needs a destination and a durable name, e.g. `titan durable delete /events-store/orders billing`\n")
	r = run(t, "--addr", addr, "-o", "json", "durable", "list", "-d", "/events-store/orders").requireOK(t)
	requireContains(t, r.stdout, `"name": "billing"`, `"live": 1`)
	_ = live
}
