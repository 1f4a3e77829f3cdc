// Package browsertest starts the headless Chromium that the console's browser tests drive
// (services/console and e2e), or skips the test where none is installed: .ci/run and the run
// command install Debian's chromium package when it is missing.
package browsertest

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// names are the browser commands looked for, in order.
var names = []string{"chromium", "chromium-browser", "google-chrome"}

// Path returns the browser to drive, or skips the test.
func Path(t testing.TB) string {
	t.Helper()
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no headless browser: install Debian's chromium package (apt-get install -y chromium; .ci/run does) to run the console's browser tests")
	return ""
}

// Start starts a headless browser with a 1280 × 900 window and returns its chromedp context,
// which ends after 2 minutes or with the test.
func Start(t testing.TB) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(Path(t)), chromedp.WindowSize(1280, 900), chromedp.NoSandbox, chromedp.DisableGPU)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(cancelTimeout)
	return ctx
}
