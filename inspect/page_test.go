package inspect_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/interlingua-dev/interlingua/inspect"
)

// chromium returns Debian's Chromium, or skips the test saying why.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("chromium is not installed (make browser-deps installs Debian's chromium): the inspector page is not tested in a browser")
	return ""
}

// browser starts headless Chromium with the flags this machine needs (no
// sandbox as root, no background networking: the network is closed) and
// a fresh profile; the test's cleanup stops it.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1600, 1000),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelCtx()
		cancelAlloc()
	})
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// The page, in a real browser, with the daemon behind auth: given the
// admin key, it lists the captured run of a Triton client against an
// agent-protocol backend, opens it, and shows the run's deltas in order in
// the client wire and canonical events columns (and the upstream wire
// column, when the backend's client is tapped), and the Triton wire's
// stated degradation of the run's reasoning block. The screenshot is kept
// in testdata/out (ignored by git).
func TestPage(t *testing.T) {
	ctx := browser(t)
	d := startDaemon(t, inspect.Config{}, true)
	want := deltas(runTriton(t, d, userKey, "demo-agent", true, nil))
	var list apiList
	apiDo(t, d, http.MethodGet, "/v1/inspect/runs", adminKey, "", &list)
	if len(list.Runs) != 1 {
		t.Fatalf("runs %+v", list.Runs)
	}
	id := list.Runs[0].ID
	row := chromedp.CSS(`#runs tbody tr[data-run="` + id + `"]`)
	err := chromedp.Do(ctx,
		chromedp.Navigate(d.URL+"/inspect/"),
		chromedp.WaitVisible(chromedp.CSS("#key")),
		chromedp.SendKeys(chromedp.CSS("#key"), adminKey),
		chromedp.Click(chromedp.CSS("#key-form button")),
		chromedp.WaitVisible(row),
	)
	if err != nil {
		t.Fatal(err)
	}
	rowText := run(t, ctx, chromedp.Text(row))
	if err := chromedp.Do(ctx, chromedp.Click(row), chromedp.WaitReady(chromedp.CSS(`#run[data-ended="1"]`))); err != nil {
		t.Fatal(err)
	}
	client := run(t, ctx, chromedp.Text(chromedp.CSS("#col-client")))
	events := run(t, ctx, chromedp.Text(chromedp.CSS("#col-events")))
	upstream := run(t, ctx, chromedp.Text(chromedp.CSS("#col-upstream")))
	notes := run(t, ctx, chromedp.Text(chromedp.CSS("#col-events .degradation")))
	status := run(t, ctx, chromedp.AttributeValue(chromedp.CSS("#run-status"), "data-status")).Value
	shot := run(t, ctx, chromedp.FullScreenshot(100))
	saveScreenshot(t, shot)
	for _, f := range []string{"demo-agent", "triton", "agent", "user", "completed"} {
		if !strings.Contains(rowText, f) {
			t.Errorf("run row %q lacks %q", rowText, f)
		}
	}
	if status != "completed" {
		t.Errorf("status %q", status)
	}
	if miss := inOrder(client, want); miss != "" {
		t.Errorf("client wire column lacks delta %q in order:\n%s", miss, client)
	}
	if miss := inOrder(events, want); miss != "" {
		t.Errorf("canonical events column lacks delta %q in order:\n%s", miss, events)
	}
	if !list.Runs[0].UpstreamRecorded {
		t.Errorf("upstream wire not recorded for the agent backend: column reads %q", upstream)
	} else if miss := inOrder(upstream, want); miss != "" {
		t.Errorf("upstream wire column lacks delta %q in order:\n%s", miss, upstream)
	}
	if !strings.Contains(notes, "triton cannot carry reasoning: dropped") {
		t.Errorf("degradation note %q", notes)
	}
}

// run runs one action in the browser and returns its value.
func run[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// saveScreenshot keeps the page's screenshot in testdata/out.
func saveScreenshot(t *testing.T, png []byte) {
	t.Helper()
	dir := filepath.Join("testdata", "out")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "inspector.png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(path)
	t.Logf("screenshot: %s", abs)
}
