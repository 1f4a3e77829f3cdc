package platform

import (
	"context"
	"io"
	"strconv"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Cloud Logging's special JSON fields: the logging agent of Cloud Run lifts them out of the
// payload into the LogEntry, which is what correlates a line with its trace and request.
const (
	FieldTrace          = "logging.googleapis.com/trace"
	FieldSpanID         = "logging.googleapis.com/spanId"
	FieldTraceSampled   = "logging.googleapis.com/trace_sampled"
	FieldSourceLocation = "logging.googleapis.com/sourceLocation"
	FieldHTTPRequest    = "httpRequest"
)

// LogOptions configures NewLogger.
type LogOptions struct {
	Service string
	Version string
	Level   string // debug, info, warn or error; "" means info
	// NoSourceLocation drops logging.googleapis.com/sourceLocation (e.g. for golden tests).
	NoSourceLocation bool
}

// NewLogger returns a JSON logger writing to w in Cloud Logging's structured format: severity,
// message, time (RFC 3339 with nanoseconds), sourceLocation and serviceContext (which Error
// Reporting uses to group errors by service).
func NewLogger(w io.Writer, o LogOptions) (*zap.Logger, error) {
	level := zapcore.InfoLevel
	if o.Level != "" {
		var err error
		if level, err = zapcore.ParseLevel(o.Level); err != nil {
			return nil, err
		}
	}
	enc := zapcore.NewJSONEncoder(zapcore.EncoderConfig{
		TimeKey:        "time",
		LevelKey:       "severity",
		NameKey:        "logger",
		MessageKey:     "message",
		StacktraceKey:  "stack_trace",
		LineEnding:     zapcore.DefaultLineEnding,
		EncodeLevel:    encodeSeverity,
		EncodeTime:     zapcore.RFC3339NanoTimeEncoder,
		EncodeDuration: zapcore.SecondsDurationEncoder,
	})
	var core zapcore.Core = zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(w)), zap.NewAtomicLevelAt(level))
	opts := []zap.Option{zap.AddStacktrace(zapcore.DPanicLevel)}
	if !o.NoSourceLocation {
		core = sourceCore{core}
		opts = append(opts, zap.AddCaller())
	}
	return zap.New(core, opts...).With(zap.Object("serviceContext", serviceContext{o.Service, o.Version})), nil
}

// encodeSeverity writes Cloud Logging's LogSeverity names.
func encodeSeverity(l zapcore.Level, enc zapcore.PrimitiveArrayEncoder) {
	switch l {
	case zapcore.DebugLevel:
		enc.AppendString("DEBUG")
	case zapcore.InfoLevel:
		enc.AppendString("INFO")
	case zapcore.WarnLevel:
		enc.AppendString("WARNING")
	case zapcore.ErrorLevel:
		enc.AppendString("ERROR")
	case zapcore.DPanicLevel:
		enc.AppendString("CRITICAL")
	case zapcore.PanicLevel:
		enc.AppendString("ALERT")
	case zapcore.FatalLevel:
		enc.AppendString("EMERGENCY")
	default:
		enc.AppendString("DEFAULT")
	}
}

type serviceContext struct{ service, version string }

func (s serviceContext) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("service", s.service)
	if s.version != "" {
		enc.AddString("version", s.version)
	}
	return nil
}

// sourceCore adds the caller as Cloud Logging's sourceLocation object; zap's own caller field is a
// "file:line" string that Cloud Logging would leave in the payload.
type sourceCore struct{ zapcore.Core }

func (c sourceCore) With(fields []zapcore.Field) zapcore.Core { return sourceCore{c.Core.With(fields)} }

func (c sourceCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c sourceCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	if e.Caller.Defined {
		fields = append(fields[:len(fields):len(fields)], zap.Object(FieldSourceLocation, sourceLocation(e.Caller)))
	}
	return c.Core.Write(e, fields)
}

type sourceLocation zapcore.EntryCaller

func (s sourceLocation) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("file", s.File)
	enc.AddString("line", strconv.Itoa(s.Line)) // int64 in the LogEntry proto, a string in its JSON form
	if s.Function != "" {
		enc.AddString("function", s.Function)
	}
	return nil
}

// SetGlobalLogger makes log the process-wide logger, for main only: zap.L() (and so Logger
// outside a request) returns it, and the standard library's log package, which the Spanner
// client and net/http write to, goes through it at WARNING, so no line escapes the JSON format.
// The returned function undoes both.
func SetGlobalLogger(log *zap.Logger) (restore func()) {
	undoGlobals := zap.ReplaceGlobals(log)
	undoStd, err := zap.RedirectStdLogAt(log.Named("stdlog"), zapcore.WarnLevel)
	if err != nil { // only for levels above DPanic
		undoStd = func() {}
	}
	return func() {
		undoStd()
		undoGlobals()
	}
}

// lineWriter logs each write as one line at WARNING; echo's own logger writes through it.
type lineWriter struct{ log *zap.Logger }

func (w lineWriter) Write(p []byte) (int, error) {
	w.log.Warn(strings.TrimSpace(string(p)))
	return len(p), nil
}

type loggerKey struct{}

// WithLogger returns a context carrying log.
func WithLogger(ctx context.Context, log *zap.Logger) context.Context {
	return context.WithValue(ctx, loggerKey{}, log)
}

// Logger returns the logger in ctx: inside a request, the one the server's middleware made, which
// carries the request id and trace fields. Outside, zap's global logger (a no-op unless replaced).
func Logger(ctx context.Context) *zap.Logger {
	if l, ok := ctx.Value(loggerKey{}).(*zap.Logger); ok {
		return l
	}
	return zap.L()
}
