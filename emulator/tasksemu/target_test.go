package tasksemu

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/protobuf/proto"
)

func TestOverrideURI(t *testing.T) {
	ifNotExists := cloudtaskspb.UriOverride_IF_NOT_EXISTS
	tests := []struct {
		name string
		url  string
		uo   *cloudtaskspb.UriOverride
		want string
	}{
		{"host", "https://a.example/p?q=1", &cloudtaskspb.UriOverride{Host: proto.String("b.example")}, "https://b.example/p?q=1"},
		{"scheme and port", "https://a.example/p", &cloudtaskspb.UriOverride{Scheme: cloudtaskspb.UriOverride_HTTP.Enum(), Port: proto.Int64(8080)}, "http://a.example:8080/p"},
		{"port 0 clears", "https://a.example:9/p", &cloudtaskspb.UriOverride{Port: proto.Int64(0)}, "https://a.example/p"},
		{"path and query", "https://a.example/p?q=1", &cloudtaskspb.UriOverride{
			PathOverride: &cloudtaskspb.PathOverride{Path: "/new"}, QueryOverride: &cloudtaskspb.QueryOverride{QueryParams: "x=2"},
		}, "https://a.example/new?x=2"},
		{"empty query clears", "https://a.example/p?q=1", &cloudtaskspb.UriOverride{QueryOverride: &cloudtaskspb.QueryOverride{}}, "https://a.example/p"},
		{"if not exists keeps what the task has", "https://a.example:9/p?q=1", &cloudtaskspb.UriOverride{
			UriOverrideEnforceMode: ifNotExists, Host: proto.String("b.example"), Port: proto.Int64(8080),
			PathOverride: &cloudtaskspb.PathOverride{Path: "/new"}, QueryOverride: &cloudtaskspb.QueryOverride{QueryParams: "x=2"},
		}, "https://a.example:9/p?q=1"},
		{"if not exists fills in", "https://a.example", &cloudtaskspb.UriOverride{
			UriOverrideEnforceMode: ifNotExists, Port: proto.Int64(8080),
			PathOverride: &cloudtaskspb.PathOverride{Path: "/new"}, QueryOverride: &cloudtaskspb.QueryOverride{QueryParams: "x=2"},
		}, "https://a.example:8080/new?x=2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := overrideURI(tt.url, tt.uo); got != tt.want {
				t.Errorf("overrideURI(%q) = %q, want %q", tt.url, got, tt.want)
			}
		})
	}
}

func TestQueueHTTPTarget(t *testing.T) {
	tg := newTarget(t, nil)
	host, port, err := net.SplitHostPort(tg.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	portN, err := strconv.ParseInt(port, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	const sa = "queue-invoker@test-project.iam.gserviceaccount.com"
	q := createQueue(t, ct, &cloudtaskspb.Queue{HttpTarget: &cloudtaskspb.HttpTarget{
		UriOverride: &cloudtaskspb.UriOverride{
			Scheme: cloudtaskspb.UriOverride_HTTP.Enum(), Host: proto.String(host), Port: proto.Int64(portN),
			PathOverride: &cloudtaskspb.PathOverride{Path: "/queue-path"},
		},
		HttpMethod: cloudtaskspb.HttpMethod_PUT,
		HeaderOverrides: []*cloudtaskspb.HttpTarget_HeaderOverride{
			{Header: &cloudtaskspb.HttpTarget_Header{Key: "X-Env", Value: "queue"}},
		},
		AuthorizationHeader: &cloudtaskspb.HttpTarget_OidcToken{OidcToken: &cloudtaskspb.OidcToken{ServiceAccountEmail: sa}},
	}}).Name
	task := httpTask("https://unreachable.invalid/task-path?keep=1")
	task.GetHttpRequest().Headers = map[string]string{"x-env": "task", "X-Task": "1"}
	task.GetHttpRequest().Body = []byte("b")
	created := createTask(t, ct, q, task)
	d := tg.waitDeliveries(t, 1, 5*time.Second)[0]
	if d.method != "PUT" || d.uri != "/queue-path?keep=1" || d.body != "b" {
		t.Errorf("got %s %s body %q, want PUT /queue-path?keep=1 body b", d.method, d.uri, d.body)
	}
	if d.header.Get("X-Env") != "queue" || d.header.Get("X-Task") != "1" {
		t.Errorf("headers %v, want X-Env: queue and X-Task: 1", d.header)
	}
	tok, _ := strings.CutPrefix(d.header.Get("Authorization"), "Bearer ")
	claims, err := emu.issuer.Verify(tok, tg.URL+"/queue-path?keep=1", time.Now())
	if err != nil || claims.Email != sa {
		t.Errorf("queue OIDC token: claims %+v, err %v", claims, err)
	}
	// The stored task is unchanged.
	if created.GetHttpRequest().GetUrl() != "https://unreachable.invalid/task-path?keep=1" {
		t.Errorf("task URL changed to %q", created.GetHttpRequest().GetUrl())
	}
}
