package platform_test

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/spanmart/spanmart/pkg/platform"
)

func TestTraceFromHeader(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header map[string]string
		want   platform.Trace
		wantOK bool
	}{
		{
			name:   "traceparent sampled",
			header: map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
			want:   platform.Trace{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7", Sampled: true},
			wantOK: true,
		},
		{
			name:   "traceparent not sampled",
			header: map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"},
			want:   platform.Trace{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7"},
			wantOK: true,
		},
		{
			name:   "future traceparent version with extra field",
			header: map[string]string{"traceparent": "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03-whatever"},
			want:   platform.Trace{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7", Sampled: true},
			wantOK: true,
		},
		{
			name:   "cloud trace context",
			header: map[string]string{"X-Cloud-Trace-Context": "105445AA7843BC8BF206B12000100000/1;o=1"},
			want:   platform.Trace{TraceID: "105445aa7843bc8bf206b12000100000", SpanID: "0000000000000001", Sampled: true},
			wantOK: true,
		},
		{
			name:   "cloud trace context without span or options",
			header: map[string]string{"X-Cloud-Trace-Context": "105445aa7843bc8bf206b12000100000"},
			want:   platform.Trace{TraceID: "105445aa7843bc8bf206b12000100000"},
			wantOK: true,
		},
		{
			name: "traceparent wins over cloud trace context",
			header: map[string]string{
				"traceparent":           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
				"X-Cloud-Trace-Context": "105445aa7843bc8bf206b12000100000/1;o=0",
			},
			want:   platform.Trace{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7", Sampled: true},
			wantOK: true,
		},
		{
			name: "bad traceparent falls back",
			header: map[string]string{
				"traceparent":           "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
				"X-Cloud-Trace-Context": "105445aa7843bc8bf206b12000100000/18446744073709551615;o=0",
			},
			want:   platform.Trace{TraceID: "105445aa7843bc8bf206b12000100000", SpanID: "ffffffffffffffff"},
			wantOK: true,
		},
		{name: "none", header: nil},
		{name: "garbage", header: map[string]string{"traceparent": "xyz", "X-Cloud-Trace-Context": "abc/def"}},
		{name: "version ff", header: map[string]string{"traceparent": "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}},
		{name: "uppercase traceparent", header: map[string]string{"traceparent": "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tc.header {
				h.Set(k, v)
			}
			got, ok := platform.TraceFromHeader(h)
			if ok != tc.wantOK {
				t.Errorf("ok = %v, want %v", ok, tc.wantOK)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTraceParentRoundTrip(t *testing.T) {
	in := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tr, err := platform.ParseTraceParent(in)
	if err != nil {
		t.Fatal(err)
	}
	if got := tr.TraceParent(); got != in {
		t.Errorf("TraceParent() = %q, want %q", got, in)
	}
	if got := (platform.Trace{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"}).TraceParent(); got != "" {
		t.Errorf("TraceParent() without span = %q, want empty", got)
	}
}
