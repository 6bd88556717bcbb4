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
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/titan-broker/titan/client"
)

// The console with history, server-side paging and a destination page (issue 31), in
// headless Chromium at 1280 px against a real titan: the rates chart opens with samples taken
// before the page was opened, the destinations table pages through the API and filters, and
// a destination's page shows its state, rates, consumers and messages and acts on it.
// Screenshots go to the test's temporary directory and are copied to /tmp/h31c-shots/.

// consoleShotsDir is where the screenshots are copied for people to look at.
const consoleShotsDir = "/tmp/h31c-shots"

// consoleBroker starts titan with the monitor token and the history sampled every
// historyMs, plus extra under titan:.
func consoleBroker(t testing.TB, historyMs int, extra string) *broker {
	t.Helper()
	return startBroker(t, strings.Replace(yamlConfigWith("", extra),
		"monitor: {host: 127.0.0.1, port: 0}",
		"monitor: {host: 127.0.0.1, port: 0, token: "+consoleToken+", history-interval-ms: "+strconv.Itoa(historyMs)+"}", 1))
}

// openConsole starts a headless Chromium 1280 px wide that sends the monitor's credentials
// and opens the console of b. The returned context drives the page.
func openConsole(t testing.TB, b *broker) context.Context {
	t.Helper()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is not installed (Debian package chromium; scripts/test installs it)")
	}
	allocOpts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 1000), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), allocOpts...)
	t.Cleanup(cancelAlloc)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(cancelCtx)
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("operator:"+consoleToken))
	err = chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, network.Enable, network.EnableParams{}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, tg, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": basic}})
		return err
	}), chromedp.Navigate(monitorURL(b)+"/"), chromedp.WaitVisible(chromedp.ID("rates")))
	requireNoError(t, err, "loading the console in chromium")
	return ctx
}

// consoleShot saves a full-page screenshot as name under dir and copies it to
// consoleShotsDir (and, with TITAN_CONSOLE_SCREENSHOTS=DIR, to DIR: the README's).
func consoleShot(t testing.TB, ctx context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	requireNoError(t, err, "screenshot %s", name)
	if len(png) < 10000 {
		t.Fatalf("screenshot %s is only %d bytes", name, len(png))
	}
	requireNoError(t, os.WriteFile(filepath.Join(dir, name), png, 0o644))
	requireNoError(t, os.MkdirAll(consoleShotsDir, 0o755))
	requireNoError(t, os.WriteFile(filepath.Join(consoleShotsDir, name), png, 0o644))
	if readme := os.Getenv("TITAN_CONSOLE_SCREENSHOTS"); readme != "" {
		requireNoError(t, os.WriteFile(filepath.Join(readme, name), png, 0o644))
	}
}

// consoleState is window.titanConsole.
type consoleState struct {
	Samples     int
	Oldest      float64
	Opened      float64
	Rates       struct{ Published, Delivered, Acknowledged float64 }
	DestsLoadMs float64
	DestsShown  int
	DestsTotal  int
	DestSamples int
}

// tokenGet GETs path?query from b's monitor with the token into out.
func tokenGet(t testing.TB, b *broker, path string, query url.Values, out any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, monitorURL(b)+path+"?"+query.Encode(), nil)
	requireNoError(t, err)
	req.Header.Set("Authorization", "Bearer "+consoleToken)
	resp, err := httpClient.Do(req)
	requireNoError(t, err, "GET %s", path)
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s?%s: HTTP %d %s", path, query.Encode(), resp.StatusCode, data)
	}
	requireNoError(t, json.Unmarshal(data, out), "decoding %s", data)
}

// createQueues makes /queue/q-00000 … /queue/q-<n-1> through the monitor API, workers at a
// time.
func createQueues(t testing.TB, b *broker, n, workers int) {
	t.Helper()
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				req, _ := http.NewRequest(http.MethodPost, monitorURL(b)+"/titan/monitor/queues?destination="+fmt.Sprintf("/queue/q-%05d", i), nil)
				req.Header.Set("Authorization", "Bearer "+consoleToken)
				resp, err := httpClient.Do(req)
				if err != nil {
					failed.Store(err.Error())
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					failed.Store("HTTP " + resp.Status)
					return
				}
			}
		})
	}
	wg.Wait()
	if f := failed.Load(); f != nil {
		t.Fatalf("creating queues: %v", f)
	}
}

func TestConsolePagesHistoryAndDestinationPage(t *testing.T) {
	t.Parallel()
	b := consoleBroker(t, 500, "")
	createQueues(t, b, 120, 4)

	// Traffic before the page opens: an acknowledging consumer on /queue/flow, a producer,
	// and three messages held on /queue/held.
	c := dial(t, b)
	_, err := c.Subscribe("", "/queue/flow", func(m *client.Message) { _ = m.Ack() }, client.WithAck(client.AckClientIndividual))
	requireNoError(t, err)
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
	var h struct {
		Samples []struct{ Published float64 }
	}
	eventually(t, 15*time.Second, func() bool {
		tokenGet(t, b, "/titan/monitor/history", nil, &h)
		n := 0
		for _, s := range h.Samples {
			if s.Published > 0 {
				n++
			}
		}
		return n >= 3
	}, "three history samples with traffic before the page opens")

	ctx := openConsole(t, b)
	dir := t.TempDir()
	state := func() consoleState { return cdpEval[consoleState](t, ctx, `window.titanConsole`) }
	text := func(id string) string {
		return cdpEval[string](t, ctx, `document.getElementById(`+strconv.Quote(id)+`).textContent`)
	}
	waitText := func(id, want string) {
		t.Helper()
		var last string
		eventually(t, 10*time.Second, func() bool { last = text(id); return strings.Contains(last, want) }, "#%s shows %q (it shows %q)", id, want, lazyText(func() string { return last }))
	}
	js := func(code string) { t.Helper(); cdpEval[bool](t, ctx, `(function(){`+code+`;return true})()`) }

	// The chart opens with the broker's history: samples older than the page.
	var st consoleState
	eventually(t, 10*time.Second, func() bool { st = state(); return st.Samples >= 3 && st.Oldest > 0 }, "history drawn")
	if st.Oldest >= st.Opened {
		t.Fatalf("the oldest sample drawn (%v) is not older than the page (%v)", st.Oldest, st.Opened)
	}
	coloured := cdpEval[int](t, ctx, `(function(){var c=document.getElementById("rates"),d=c.getContext("2d").getImageData(0,0,c.width,c.height-40).data,n=0;
		for(var i=0;i<d.length;i+=4){var mx=Math.max(d[i],d[i+1],d[i+2]),mn=Math.min(d[i],d[i+1],d[i+2]);if(d[i+3]>128&&mx-mn>90)n++}return n})()`)
	if coloured < 30 {
		t.Fatalf("the rates chart drew %d coloured pixels", coloured)
	}

	// The first page: 50 of the 122 destinations, from the API.
	waitText("page-info", "1–50 of 122")
	checkEqual(t, 50, cdpEval[int](t, ctx, `document.querySelectorAll("#dests tbody tr").length`), "rows on the first page")
	waitText("dests", "/queue/flow")
	st = state()
	t.Logf("destinations page (122 destinations) loaded in %.0f ms", st.DestsLoadMs)
	consoleShot(t, ctx, dir, "console-pages.png")

	// Next page, then the last.
	js(`document.getElementById("page-next").click()`)
	waitText("page-info", "51–100 of 122")
	waitText("dests", "/queue/q-00048")
	js(`document.getElementById("page-next").click()`)
	waitText("page-info", "101–122 of 122")
	checkEqual(t, true, cdpEval[bool](t, ctx, `document.getElementById("page-next").disabled`), "next disabled on the last page")
	js(`document.getElementById("page-prev").click()`)
	waitText("page-info", "51–100 of 122")

	// Filter: a substring starts again at the first page; a glob.
	filter := func(f string) {
		t.Helper()
		js(`var i=document.getElementById("dest-filter"); i.value=` + strconv.Quote(f) + `; i.dispatchEvent(new Event("input"))`)
	}
	filter("Q-0011")
	waitText("page-info", "1–10 of 10")
	waitText("dests-title", "matching “Q-0011”")
	consoleShot(t, ctx, dir, "console-filter.png")
	filter("/queue/h*")
	waitText("page-info", "1–1 of 1")
	waitText("dests", "/queue/held")

	// At 1280 px the page scrolls no sideways and the table's last column ends inside.
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

	// The destination page of /queue/held: state, its rates, consumers, messages.
	js(`document.querySelector('#dests a.dest[data-dest="/queue/held"]').click()`)
	waitText("dp-title", "/queue/held")
	checkEqual(t, "none", cdpEval[string](t, ctx, `document.getElementById("main-view").style.display`), "main view hidden")
	waitText("browse-title", "Messages of /queue/held (group default, 3 shown")
	waitText("browse", "h3")
	waitText("dp-info", "Depth: 3")
	waitText("dp-consumers-title", "Consumers (0)")
	eventually(t, 10*time.Second, func() bool { return state().DestSamples >= 2 }, "the destination's rates over time")
	consoleShot(t, ctx, dir, "console-destination.png")

	// Its actions: pause and resume, purge (two clicks), delete (two clicks).
	clickDP := func(action string) {
		t.Helper()
		sel := fmt.Sprintf(`#dp-actions button[data-action=%q]`, action)
		eventually(t, 10*time.Second, func() bool {
			return cdpEval[bool](t, ctx, `(function(){var b=document.querySelector(`+strconv.Quote(sel)+`); if(!b) return false; b.click(); return true})()`)
		}, "clicking %s", sel)
	}
	clickDP("pause")
	eventuallyAuthQueue(t, b, "/queue/held", "paused", func(q queueStat, ok bool) bool { return ok && q.Paused })
	waitText("dp-state", "paused")
	clickDP("resume")
	eventuallyAuthQueue(t, b, "/queue/held", "resumed", func(q queueStat, ok bool) bool { return ok && !q.Paused })
	clickDP("purge")
	clickDP("purge")
	eventuallyAuthQueue(t, b, "/queue/held", "purged", func(q queueStat, ok bool) bool { return ok && q.Size == 0 })
	waitText("browse", "holds no ready or scheduled message")

	// A consumer shows on /queue/flow's page.
	js(`location.hash = "#/destination/default/" + encodeURIComponent("/queue/flow")`)
	waitText("dp-consumers-title", "Consumers (1)")
	waitText("dp-consumers", "client-individual")

	// Back to the list, where the filter still holds.
	js(`document.getElementById("dp-back").click()`)
	waitText("page-info", "1–1 of 1")
	checkEqual(t, "block", cdpEval[string](t, ctx, `document.getElementById("main-view").style.display`), "main view back")
}

// lazyText is text computed when formatted (a failure message's last observed value).
type lazyText func() string

func (f lazyText) String() string { return f() }

// sendToQueues sends one message to each of /queue/q-00000 … /queue/q-<n-1> over conns
// connections (traffic creates the queues, as in production), a RECEIPT every 500 SENDs and
// at the end.
func sendToQueues(t testing.TB, b *broker, n, conns int) {
	t.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for range conns {
		c, err := client.Dial(context.Background(), b.stompAddr)
		requireNoError(t, err, "dialing titan")
		t.Cleanup(func() { _ = c.Close() })
		wg.Go(func() {
			for k := 0; ; k++ {
				i := next.Add(1) - 1
				if i >= int64(n) {
					_, err := c.Send(context.Background(), "", "/queue/receipt-barrier", []byte("end"))
					errs <- err
					return
				}
				var opts []client.SendOption
				if k%500 != 499 {
					opts = append(opts, client.WithoutReceipt())
				}
				if _, err := c.Send(context.Background(), "", fmt.Sprintf("/queue/q-%05d", i), []byte("m"), opts...); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		requireNoError(t, err, "sending")
	}
}

// BenchmarkConsoleDestinations100k measures the console with 100,000 destinations (issue
// 31: the destinations page loads in under a second): ms-first-load is navigation start to
// the first page of the destinations table rendered in Chromium, ms-next-page and ms-filter
// the request-to-render time of the next page and of a filter, and ms-api-page,
// ms-api-filter, ms-api-snapshot and ms-api-history the monitor API's answers measured from
// Go. Creating the destinations takes most of the run; run it with
// go test -run '^$' -bench ConsoleDestinations100k -benchtime 1x ./test/e2e/.
func BenchmarkConsoleDestinations100k(b *testing.B) {
	const n = 100000
	br := startBroker(b, strings.NewReplacer(
		"monitor: {host: 127.0.0.1, port: 0}", "monitor: {host: 127.0.0.1, port: 0, token: "+consoleToken+"}",
		"log: {level: debug}", "log: {level: info}").Replace(yamlConfigWith("max-destinations-by-client: -1", "  limits: {max-destinations: 200000}\n")))
	start := time.Now()
	sendToQueues(b, br, n, 8)
	b.Logf("made %d queues (one message each) in %v", n, time.Since(start).Round(time.Millisecond))
	var l struct{ Total int }
	tokenGet(b, br, "/titan/monitor/queues", url.Values{"limit": {"1"}}, &l)
	b.Logf("the broker holds %d queues", l.Total)
	if l.Total != n+1 { // and /queue/receipt-barrier
		b.Fatalf("the broker holds %d queues, want %d", l.Total, n+1)
	}
	apiMs := func(path string, q url.Values) float64 {
		t0 := time.Now()
		var out json.RawMessage
		tokenGet(b, br, path, q, &out)
		return float64(time.Since(t0).Microseconds()) / 1000
	}

	var first, next, filter, apiPage, apiFilter, apiSnap, apiHist float64
	ctx := openConsole(b, br)
	b.ResetTimer()
	for i := range b.N {
		if i > 0 {
			_, err := chromedp.Run(ctx, chromedp.Reload())
			requireNoError(b, err, "reload")
		}
		var st consoleState
		var firstMs float64
		eventually(b, 30*time.Second, func() bool {
			st = cdpEval[consoleState](b, ctx, `window.titanConsole`)
			firstMs = cdpEval[float64](b, ctx, `window.titanConsole.destsFirstMs`)
			return firstMs > 0 && st.DestsShown == 50 && st.DestsTotal == n+1
		}, "the first page of %d destinations", n)
		first += firstMs
		cdpEval[bool](b, ctx, `(function(){window.titanConsole.destsLoadMs=0;document.getElementById("page-next").click();return true})()`)
		eventually(b, 30*time.Second, func() bool {
			return strings.Contains(cdpEval[string](b, ctx, `document.getElementById("page-info").textContent`), "51–100 of") &&
				cdpEval[float64](b, ctx, `window.titanConsole.destsLoadMs`) > 0
		}, "the next page")
		next += cdpEval[float64](b, ctx, `window.titanConsole.destsLoadMs`)
		cdpEval[bool](b, ctx, `(function(){window.titanConsole.destsLoadMs=0;var i=document.getElementById("dest-filter");i.value="q-0999";i.dispatchEvent(new Event("input"));return true})()`)
		eventually(b, 30*time.Second, func() bool {
			return strings.Contains(cdpEval[string](b, ctx, `document.getElementById("page-info").textContent`), "of 10") &&
				cdpEval[float64](b, ctx, `window.titanConsole.destsLoadMs`) > 0
		}, "the filtered page")
		filter += cdpEval[float64](b, ctx, `window.titanConsole.destsLoadMs`)
		if i == 0 {
			consoleShot(b, ctx, b.TempDir(), "console-100k.png")
		}
		apiPage += apiMs("/titan/monitor/queues", url.Values{"limit": {"50"}, "offset": {"50000"}})
		apiFilter += apiMs("/titan/monitor/queues", url.Values{"limit": {"50"}, "filter": {"*-9999?"}})
		apiSnap += apiMs("/titan/monitor/snapshot", url.Values{"queues": {"false"}})
		apiHist += apiMs("/titan/monitor/history", nil)
	}
	b.StopTimer()
	nf := float64(b.N)
	b.ReportMetric(first/nf, "ms-first-load")
	b.ReportMetric(next/nf, "ms-next-page")
	b.ReportMetric(filter/nf, "ms-filter")
	b.ReportMetric(apiPage/nf, "ms-api-page")
	b.ReportMetric(apiFilter/nf, "ms-api-filter")
	b.ReportMetric(apiSnap/nf, "ms-api-snapshot")
	b.ReportMetric(apiHist/nf, "ms-api-history")
}
