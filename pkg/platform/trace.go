package platform

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"go.uber.org/zap"
)

// Trace is the trace context of a request: from the W3C traceparent header, or from Google's
// older X-Cloud-Trace-Context header, which Cloud Run also sets.
type Trace struct {
	TraceID string // 32 lowercase hex digits
	SpanID  string // 16 lowercase hex digits; "" when the header had none
	Sampled bool
}

// Valid reports whether t carries a trace id.
func (t Trace) Valid() bool { return t.TraceID != "" }

// TraceParent formats t as a W3C traceparent header value, "" when t has no trace id or span id.
// Outbox rows store it so consumers continue the trace.
func (t Trace) TraceParent() string {
	if t.TraceID == "" || t.SpanID == "" {
		return ""
	}
	flags := "00"
	if t.Sampled {
		flags = "01"
	}
	return "00-" + t.TraceID + "-" + t.SpanID + "-" + flags
}

// LogFields returns the Cloud Logging fields that attach a log line to t in project.
func (t Trace) LogFields(project string) []zap.Field {
	if !t.Valid() {
		return nil
	}
	trace := t.TraceID
	if project != "" {
		trace = "projects/" + project + "/traces/" + t.TraceID
	}
	fields := []zap.Field{zap.String(FieldTrace, trace)}
	if t.SpanID != "" {
		fields = append(fields, zap.String(FieldSpanID, t.SpanID))
	}
	return append(fields, zap.Bool(FieldTraceSampled, t.Sampled))
}

// TraceFromHeader reads traceparent, falling back to X-Cloud-Trace-Context; ok is false when
// neither is present and well formed.
func TraceFromHeader(h http.Header) (t Trace, ok bool) {
	if t, err := ParseTraceParent(h.Get("traceparent")); err == nil {
		return t, true
	}
	if t, err := ParseCloudTraceContext(h.Get("X-Cloud-Trace-Context")); err == nil {
		return t, true
	}
	return Trace{}, false
}

// ParseTraceParent parses a W3C traceparent value: version-traceid-parentid-flags.
func ParseTraceParent(v string) (Trace, error) {
	parts := strings.Split(strings.TrimSpace(v), "-")
	if len(parts) < 4 {
		return Trace{}, fmt.Errorf("traceparent %q: want version-traceid-parentid-flags", v)
	}
	version, traceID, spanID, flags := parts[0], parts[1], parts[2], parts[3]
	// Version 00 has exactly four fields; later versions may append more, which we ignore.
	if !isHex(version, 2) || version == "ff" || (version == "00" && len(parts) != 4) {
		return Trace{}, fmt.Errorf("traceparent %q: bad version", v)
	}
	if !isHex(traceID, 32) || isZeros(traceID) {
		return Trace{}, fmt.Errorf("traceparent %q: bad trace id", v)
	}
	if !isHex(spanID, 16) || isZeros(spanID) {
		return Trace{}, fmt.Errorf("traceparent %q: bad parent id", v)
	}
	if !isHex(flags, 2) {
		return Trace{}, fmt.Errorf("traceparent %q: bad flags", v)
	}
	f, _ := strconv.ParseUint(flags, 16, 8)
	return Trace{TraceID: traceID, SpanID: spanID, Sampled: f&1 == 1}, nil
}

// ParseCloudTraceContext parses X-Cloud-Trace-Context: TRACE_ID[/SPAN_ID][;o=OPTIONS], where
// SPAN_ID is decimal (it becomes 16 hex digits, the form Cloud Logging's spanId wants) and o=1
// means sampled.
func ParseCloudTraceContext(v string) (Trace, error) {
	v = strings.TrimSpace(v)
	rest, opts, _ := strings.Cut(v, ";")
	traceID, span, hasSpan := strings.Cut(rest, "/")
	traceID = strings.ToLower(traceID)
	if !isHex(traceID, 32) || isZeros(traceID) {
		return Trace{}, fmt.Errorf("X-Cloud-Trace-Context %q: bad trace id", v)
	}
	t := Trace{TraceID: traceID}
	if hasSpan && span != "" {
		n, err := strconv.ParseUint(span, 10, 64)
		if err != nil {
			return Trace{}, fmt.Errorf("X-Cloud-Trace-Context %q: bad span id", v)
		}
		if n != 0 {
			t.SpanID = fmt.Sprintf("%016x", n)
		}
	}
	t.Sampled = strings.TrimSpace(opts) == "o=1"
	return t, nil
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func isZeros(s string) bool { return strings.Trim(s, "0") == "" }

type traceKey struct{}

// WithTrace returns a context carrying t.
func WithTrace(ctx context.Context, t Trace) context.Context {
	return context.WithValue(ctx, traceKey{}, t)
}

// TraceFromContext returns the trace of the request ctx belongs to, the zero Trace if none.
func TraceFromContext(ctx context.Context) Trace {
	t, _ := ctx.Value(traceKey{}).(Trace)
	return t
}

type requestIDKey struct{}

// RequestID returns the request id of the request ctx belongs to, "" if none.
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}
