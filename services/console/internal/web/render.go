package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/spanmart/spanmart/services/console/internal/auth"
)

// pages are the parsed templates: each page's file together with the layout, so that every
// page defines its own "title" and "content".
type pages struct {
	byName map[string]*template.Template
}

// Fragments are templates rendered alone (no layout), defined inside a page's file.
const fragmentOverview = "overview-tables"

func parsePages() (*pages, error) {
	layout, err := fs.ReadFile(templateFS, "templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	p := &pages{byName: map[string]*template.Template{}}
	for _, file := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(file, "templates/"), ".html")
		if name == "layout" {
			continue
		}
		body, err := fs.ReadFile(templateFS, file)
		if err != nil {
			return nil, fmt.Errorf("web: %w", err)
		}
		t, err := template.New("layout").Funcs(funcs).Parse(string(layout))
		if err == nil {
			_, err = t.New(name).Parse(string(body))
		}
		if err != nil {
			return nil, fmt.Errorf("web: template %s: %w", name, err)
		}
		p.byName[name] = t
	}
	return p, nil
}

// frame is what the layout reads besides the page's own data.
type frame struct {
	Nav      string // the current section: "overview", "failed", "orders", "stuck"
	Operator string // "" on the sign-in page
	CSRF     string
	Page     any
}

// navOf maps a page to its section.
var navOf = map[string]string{"overview": "overview", "failed": "failed", "replayed": "failed", "orders": "orders", "order": "orders", "stuck": "stuck"}

// render writes page with data inside the layout. The page is rendered into a buffer first, so
// that a template error is a clean 500 rather than half a page.
func (s *Server) render(c echo.Context, status int, page string, data any) error {
	t, ok := s.pages.byName[page]
	if !ok {
		return fmt.Errorf("web: no page %q", page)
	}
	id := auth.IdentityOf(c.Request().Context())
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", frame{Nav: navOf[page], Operator: id.Email, CSRF: id.CSRF, Page: data}); err != nil {
		return fmt.Errorf("web: render %s: %w", page, err)
	}
	return s.write(c, status, buf.Bytes())
}

// renderFragment writes the template name of page's file alone.
func (s *Server) renderFragment(c echo.Context, page, name string, data any) error {
	var buf bytes.Buffer
	if err := s.pages.byName[page].ExecuteTemplate(&buf, name, data); err != nil {
		return fmt.Errorf("web: render %s: %w", name, err)
	}
	return s.write(c, http.StatusOK, buf.Bytes())
}

func (s *Server) write(c echo.Context, status int, body []byte) error {
	h := c.Response().Header()
	// Pages show live state and the operator's session: never cached, never framed.
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	h.Set("Referrer-Policy", "same-origin")
	return c.HTMLBlob(status, body)
}

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"ts":      formatTime,
	"clock":   formatClock,
	"day":     formatDay,
	"tsp":     formatTimePtr,
	"seconds": formatSeconds,
	"dur":     formatDuration,
	"lat":     formatLatency,
	"pretty":  prettyJSON,
	"short":   shortID,
	"money":   formatMoney,
	"plural":  plural,
}

// formatTime is a time as the pages show it: UTC, to the millisecond.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000Z")
}

// formatClock is a time of day (UTC, to the millisecond): the timeline's, whose rows share a day.
func formatClock(t time.Time) string { return t.UTC().Format("15:04:05.000") }

// formatDay is a time's date (UTC).
func formatDay(t time.Time) string { return t.UTC().Format("2006-01-02") }

func formatTimePtr(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return formatTime(*t)
}

// formatSeconds is a latency or an age given in seconds.
func formatSeconds(sec float64) string {
	return formatDuration(time.Duration(sec * float64(time.Second)))
}

// formatDuration shows a duration with the precision that matters at its size: milliseconds
// below a second, hundredths below ten seconds, seconds below an hour, then minutes.
func formatDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + formatDuration(-d)
	case d == 0:
		return "0"
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < 10*time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	case d < time.Hour:
		return d.Round(time.Second).String()
	default:
		return d.Round(time.Minute).String()
	}
}

// formatLatency is a latency that may be unknown (nil).
func formatLatency(d *time.Duration) string {
	if d == nil {
		return "—"
	}
	return formatDuration(*d)
}

// prettyJSON indents a JSON value (html/template escapes it when it is written).
func prettyJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}

// shortID is the start of a UUID, enough to tell ids apart on a page (the full id is in the
// element's title and links).
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// formatMoney shows minor units in their currency (JPY has none below the yen).
func formatMoney(minor int64, currency string) string {
	switch strings.ToUpper(currency) {
	case "JPY", "KRW":
		return fmt.Sprintf("%d %s", minor, currency)
	}
	return fmt.Sprintf("%.2f %s", float64(minor)/100, currency)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
