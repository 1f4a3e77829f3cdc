package main

import "testing"

func TestPrettyLog(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		ok             bool
	}{
		{
			name: "service line",
			in:   `{"severity":"INFO","time":"2026-11-29T15:50:18.9Z","message":"starting","serviceContext":{"service":"orders"},"service":"orders","addr":"[::]:8081","logging.googleapis.com/sourceLocation":{"file":"run.go"}}`,
			want: "INFO starting service=orders addr=[::]:8081",
			ok:   true,
		},
		{
			name: "quoting, numbers, objects, trace",
			in:   `{"severity":"ERROR","message":"request failed","error":"dial tcp: refused","status":503,"labels":{"a":1},"logging.googleapis.com/trace":"projects/p/traces/abc"}`,
			want: `ERROR request failed error="dial tcp: refused" status=503 labels={"a":1} trace=projects/p/traces/abc`,
			ok:   true,
		},
		{name: "multi-line message", in: `{"message":"a\nb"}`, want: `a\nb`, ok: true},
		{name: "emulator line", in: "spanneremu: ready on 127.0.0.1:9010"},
		{name: "JSON without a message", in: `{"queues":[]}`},
		{name: "broken JSON", in: `{"message":"x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := prettyLog(tc.in)
			if ok != tc.ok || got != tc.want {
				t.Errorf("prettyLog(%s) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
			}
		})
	}
}
