package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/titan-broker/titan/client"
)

// The web console in a real headless Chromium (Debian's chromium, driven by chromedp) against
// a real titan with a monitor token (issue 14): the page loads through the monitor's
// authentication, the rates graph draws while traffic flows, and pause, resume, purge,
// browse, re-drive, close-connection, create, ring size, publish and delete done on the page
// change the broker's state.
// With TITAN_CONSOLE_SCREENSHOTS=DIR it also writes console-idle.png and console-bench.png
// (the README's screenshots) there.

const consoleToken = "console-secret-0123456789"

// authCall is opCall with the monitor token.
func authCall(t *testing.T, b *broker, method, path string, query url.Values, out any) int {
	t.Helper()
	u := monitorURL(b) + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequest(method, u, nil)
	requireNoError(t, err)
	req.Header.Set("Authorization", "Bearer "+consoleToken)
	resp, err := httpClient.Do(req)
	requireNoError(t, err, "%s %s", method, u)
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		requireNoError(t, json.Unmarshal(data, out), "decoding %s", data)
	}
	return resp.StatusCode
}

func authQueue(t *testing.T, b *broker, destination string) (queueStat, bool) {
	t.Helper()
	var l queueList
	if code := authCall(t, b, http.MethodGet, "/titan/monitor/queues", url.Values{"destination": {destination}}, &l); code != http.StatusOK {
		t.Fatalf("GET queues %s: HTTP %d", destination, code)
	}
	if len(l.Queues) != 1 {
		return queueStat{}, false
	}
	return l.Queues[0], true
}

func eventuallyAuthQueue(t *testing.T, b *broker, destination, what string, cond func(queueStat, bool) bool) {
	t.Helper()
	var last queueStat
	eventually(t, 10*time.Second, func() bool {
		q, ok := authQueue(t, b, destination)
		last = q
		return cond(q, ok)
	}, "%s: %s (last %+v)", destination, what, &last)
}

func TestConsoleInHeadlessChromium(t *testing.T) {
	t.Parallel()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is not installed (Debian package chromium; scripts/test installs it)")
	}
	b := startBroker(t, strings.Replace(yamlConfigWith("", `  address-settings:
    - {match: "jobs", max-deliveries: 1}
`), "monitor: {host: 127.0.0.1, port: 0}", "monitor: {host: 127.0.0.1, port: 0, token: "+consoleToken+", history-interval-ms: 1000}", 1))

	// The page itself asks for the monitor's credentials.
	resp, err := httpClient.Get(monitorURL(b) + "/")
	requireNoError(t, err)
	resp.Body.Close()
	checkEqual(t, http.StatusUnauthorized, resp.StatusCode, "console without credentials")

	allocOpts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 1300), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), allocOpts...)
	defer cancelAlloc()
	ctx, cancelCtx := chromedp.NewContext(actx)
	defer cancelCtx()
	// What a browser sends once its user answered the Basic challenge (any user, the token
	// as password).
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("operator:"+consoleToken))
	text := func(id string) string {
		return cdpEval[string](t, ctx, `document.getElementById(`+strconv.Quote(id)+`).textContent`)
	}
	waitText := func(id, want string) {
		t.Helper()
		eventually(t, 15*time.Second, func() bool { return strings.Contains(text(id), want) }, "#%s shows %q", id, want)
	}
	click := func(action, destination string) {
		t.Helper()
		sel := fmt.Sprintf(`button[data-action=%q][data-dest=%q]`, action, destination)
		eventually(t, 15*time.Second, func() bool {
			return cdpEval[bool](t, ctx, `(function(){var b=document.querySelector(`+strconv.Quote(sel)+`); if(!b) return false; b.click(); return true})()`)
		}, "clicking %s", sel)
	}
	screenshot := func(name string) {
		t.Helper()
		dir := os.Getenv("TITAN_CONSOLE_SCREENSHOTS")
		if dir == "" {
			dir = t.TempDir()
		}
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		requireNoError(t, err, "screenshot")
		if len(png) < 10000 {
			t.Fatalf("screenshot %s is only %d bytes", name, len(png))
		}
		requireNoError(t, os.WriteFile(filepath.Join(dir, name), png, 0o644))
	}

	err = chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, network.Enable, network.EnableParams{}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, tg, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": basic}})
		return err
	}), chromedp.Navigate(monitorURL(b)+"/"), chromedp.WaitVisible(chromedp.ID("rates")))
	requireNoError(t, err, "loading the console in chromium")
	waitText("status", "live")
	waitText("conns-title", "Connections (0)")
	screenshot("console-idle.png")

	// Traffic: a producer and an acknowledging consumer on /queue/flow, an events-store log
	// with a durable reader, and a queue that holds messages.
	c := dial(t, b)
	_, err = c.Subscribe("", "/queue/flow", func(m *client.Message) { _ = m.Ack() }, client.WithAck(client.AckClientIndividual))
	requireNoError(t, err)
	_, err = c.Subscribe("", "/events-store/audit", func(*client.Message) {}, client.WithAck(client.AckClientIndividual), client.WithDurableName("auditor"), client.WithStartPosition("first"))
	requireNoError(t, err)
	sendN(t, c, "/events-store/audit", "a1", "a2")
	sendN(t, c, "/queue/held", "h1", "h2", "h3")
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; !stop.Load(); i++ {
			if _, err := c.Send(context.Background(), "", "/queue/flow", []byte("f"+strconv.Itoa(i))); err != nil {
				return
			}
		}
	}()
	defer func() { stop.Store(true); <-done }()

	// The graph draws the traffic: rates above zero, and the series' colours (published,
	// delivered and acknowledged overlap on a queue with a consumer) above the baseline.
	eventually(t, 20*time.Second, func() bool {
		st := cdpEval[struct {
			Samples int
			Rates   struct{ Published, Delivered, Acknowledged float64 }
			MaxRate float64
		}](t, ctx, `window.titanConsole`)
		return st.Samples >= 10 && st.Rates.Published > 1 && st.Rates.Acknowledged > 1 && st.MaxRate > 1
	}, "live rates while traffic flows")
	blue := cdpEval[int](t, ctx, `(function(){var c=document.getElementById("rates"),d=c.getContext("2d").getImageData(0,0,c.width,c.height-40).data,n=0;
		for(var i=0;i<d.length;i+=4){var mx=Math.max(d[i],d[i+1],d[i+2]),mn=Math.min(d[i],d[i+1],d[i+2]);if(d[i+3]>128&&mx-mn>90)n++}return n})()`)
	if blue < 30 {
		t.Fatalf("the rates graph drew %d coloured pixels above its baseline", blue)
	}
	waitText("dests", "/queue/flow")
	waitText("durables", "auditor")
	waitText("logs", "/events-store/audit")

	// Pause and resume from the page.
	click("pause", "/queue/held")
	eventuallyAuthQueue(t, b, "/queue/held", "paused", func(q queueStat, ok bool) bool { return ok && q.Paused })
	click("resume", "/queue/held")
	eventuallyAuthQueue(t, b, "/queue/held", "resumed", func(q queueStat, ok bool) bool { return ok && !q.Paused })

	// Browse shows the messages without consuming them.
	click("browse", "/queue/held")
	waitText("browse-title", "Messages of /queue/held")
	waitText("browse", "h3")
	if q, _ := authQueue(t, b, "/queue/held"); q.Size != 3 {
		t.Fatalf("browsing consumed messages: %+v", q)
	}

	// Purge needs a confirming second click.
	click("purge", "/queue/held")
	waitText("dests", "confirm purge")
	if q, _ := authQueue(t, b, "/queue/held"); q.Size != 3 {
		t.Fatalf("purged on the first click: %+v", q)
	}
	click("purge", "/queue/held")
	eventuallyAuthQueue(t, b, "/queue/held", "purged", func(q queueStat, ok bool) bool { return ok && q.Size == 0 })
	waitText("flash", "purged 3 messages")
	// Browse opened /queue/held's destination page; back to the list.
	cdpEval[bool](t, ctx, `(function(){location.hash="";return true})()`)
	waitText("dests-title", "Destinations")

	// Dead letters re-driven from the page.
	nacker := dial(t, b)
	sub, err := nacker.Subscribe("", "/queue/jobs", func(m *client.Message) { _ = m.Nack() }, client.WithAck(client.AckClientIndividual))
	requireNoError(t, err)
	sendN(t, c, "/queue/jobs", "j1", "j2")
	eventuallyAuthQueue(t, b, "/queue/DLQ.jobs", "2 dead letters", func(q queueStat, ok bool) bool { return ok && q.Size == 2 })
	requireNoError(t, sub.Unsubscribe())
	click("redrive", "/queue/DLQ/jobs")
	eventuallyAuthQueue(t, b, "/queue/DLQ.jobs", "re-driven", func(q queueStat, ok bool) bool { return ok && q.Size == 0 })
	eventuallyAuthQueue(t, b, "/queue/jobs", "back on their queue", func(q queueStat, ok bool) bool { return ok && q.Size == 2 })

	// Close the nacker's connection from the page.
	var cl struct{ Connections []opConnection }
	authCall(t, b, http.MethodGet, "/titan/monitor/connections", nil, &cl)
	checkEqual(t, 2, len(cl.Connections), "connections before the close")
	id := cl.Connections[1].ID
	waitText("conns", id)
	click("close-connection", id)
	click("close-connection", id)
	eventually(t, 10*time.Second, func() bool {
		select {
		case <-nacker.Done():
			return true
		default:
			return false
		}
	}, "the closed client notices")
	waitText("conns-title", "Connections (1)")

	// Create with a ring size, publish a test message, and delete, from the page's forms.
	fill := func(id, value string) {
		t.Helper()
		cdpEval[bool](t, ctx, `(function(){document.getElementById(`+strconv.Quote(id)+`).value=`+strconv.Quote(value)+`;return true})()`)
	}
	submit := func(id string) {
		t.Helper()
		cdpEval[bool](t, ctx, `(function(){document.getElementById(`+strconv.Quote(id)+`).click();return true})()`)
	}
	fill("create-dest", "/queue/made")
	fill("create-ring", "4")
	submit("create-submit")
	eventuallyAuthQueue(t, b, "/queue/made", "created with ring size 4", func(q queueStat, ok bool) bool { return ok && q.RingSize == 4 })
	fill("create-ring", "7")
	submit("ring-submit")
	eventuallyAuthQueue(t, b, "/queue/made", "ring size 7", func(q queueStat, ok bool) bool { return ok && q.RingSize == 7 })
	fill("publish-dest", "/queue/made")
	fill("publish-body", "from the console")
	submit("publish-submit")
	eventuallyAuthQueue(t, b, "/queue/made", "a published test message", func(q queueStat, ok bool) bool { return ok && q.Size == 1 })
	click("delete", "/queue/made")
	click("delete", "/queue/made")
	eventuallyAuthQueue(t, b, "/queue/made", "deleted", func(_ queueStat, ok bool) bool { return !ok })

	// Under titan bench, for the README.
	stop.Store(true)
	<-done
	bench := exec.Command(titanBin, "bench", "--stomp", b.stompAddr, "--destination", "/queue/bench", "--producers", "2", "--consumers", "2", "--messages", "5000000")
	bench.Env = append(os.Environ(), "NO_COLOR=1")
	requireNoError(t, bench.Start())
	defer func() { _ = bench.Process.Kill(); _ = bench.Wait() }()
	eventually(t, 30*time.Second, func() bool {
		return cdpEval[float64](t, ctx, `window.titanConsole.rates.published`) > 100
	}, "bench traffic on the graph")
	waitText("conns-title", "Connections (5)")
	from := cdpEval[int](t, ctx, `window.titanConsole.samples`)
	eventually(t, 30*time.Second, func() bool {
		return cdpEval[int](t, ctx, `window.titanConsole.samples`) >= from+8
	}, "8 s of bench samples for the screenshot")
	// At 1280 px (the window) the page scrolls no sideways and every table's last column,
	// Actions included, ends inside the window.
	overflow := cdpEval[string](t, ctx, `(function(){
		var w = document.documentElement.clientWidth, out = [];
		if (document.documentElement.scrollWidth > w) out.push("page " + document.documentElement.scrollWidth + " px wide");
		document.querySelectorAll("table").forEach(function (tb) {
			var th = tb.querySelector("thead th:last-child");
			if (th && th.getBoundingClientRect().right > w) out.push(th.textContent + " column ends at " + Math.round(th.getBoundingClientRect().right) + " px");
		});
		return out.join("; ");
	})()`)
	if overflow != "" {
		t.Errorf("the console does not fit a 1280 px window: %s", overflow)
	}
	screenshot("console-bench.png")
}

// cdpEval evaluates js in the page of ctx and decodes its value.
func cdpEval[T any](t testing.TB, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	requireNoError(t, err, "evaluating %s", js)
	return v
}
