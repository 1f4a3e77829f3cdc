package platform_test

import (
	"context"
	"fmt"
	stdlog "log"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"

	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/pkg/platform/platformtest"
)

func TestLoggerCloudLoggingFields(t *testing.T) {
	logs := &platformtest.Logs{}
	log, err := platform.NewLogger(logs, platform.LogOptions{Service: "orders", Version: "v1", Level: "debug"})
	if err != nil {
		t.Fatal(err)
	}
	log.Debug("d")
	log.Info("i", zap.String("order_id", "o-1"))
	log.Warn("w")
	log.Error("e")

	entries := logs.Entries(t)
	var severities []string
	for _, e := range entries {
		severities = append(severities, e["severity"].(string))
	}
	if diff := cmp.Diff([]string{"DEBUG", "INFO", "WARNING", "ERROR"}, severities); diff != "" {
		t.Errorf("severities mismatch (-want +got):\n%s", diff)
	}
	info := entries[1]
	if _, err := time.Parse(time.RFC3339Nano, info["time"].(string)); err != nil {
		t.Errorf("time %v is not RFC 3339: %v", info["time"], err)
	}
	delete(info, "time")
	loc, _ := info[platform.FieldSourceLocation].(map[string]any)
	if !strings.HasSuffix(loc["file"].(string), "log_test.go") || loc["line"] == "" || !strings.Contains(loc["function"].(string), "TestLoggerCloudLoggingFields") {
		t.Errorf("sourceLocation = %v, want this test's file, line and function", loc)
	}
	delete(info, platform.FieldSourceLocation)
	want := map[string]any{
		"severity":       "INFO",
		"message":        "i",
		"order_id":       "o-1",
		"serviceContext": map[string]any{"service": "orders", "version": "v1"},
	}
	if diff := cmp.Diff(want, info); diff != "" {
		t.Errorf("entry mismatch (-want +got):\n%s", diff)
	}
}

func TestLoggerLevel(t *testing.T) {
	logs := &platformtest.Logs{}
	log, err := platform.NewLogger(logs, platform.LogOptions{Service: "s", Level: "warn", NoSourceLocation: true})
	if err != nil {
		t.Fatal(err)
	}
	log.Info("dropped")
	log.Warn("kept")
	got := logs.Entries(t)
	if len(got) != 1 || got[0]["message"] != "kept" {
		t.Errorf("entries = %v, want only the warning", got)
	}
	if _, ok := got[0][platform.FieldSourceLocation]; ok {
		t.Error("sourceLocation present with NoSourceLocation")
	}
	if _, err := platform.NewLogger(logs, platform.LogOptions{Level: "loud"}); err == nil {
		t.Error("NewLogger accepted level loud")
	}
}

func TestLoggerFromContext(t *testing.T) {
	log := zap.NewExample()
	if got := platform.Logger(platform.WithLogger(context.Background(), log)); got != log {
		t.Error("Logger(WithLogger(ctx, l)) is not l")
	}
	if got := platform.Logger(context.Background()); got == nil {
		t.Error("Logger(ctx without logger) = nil")
	}
}

func TestSetGlobalLogger(t *testing.T) {
	logs := &platformtest.Logs{}
	log, err := platform.NewLogger(logs, platform.LogOptions{Service: "s", NoSourceLocation: true})
	if err != nil {
		t.Fatal(err)
	}
	restore := platform.SetGlobalLogger(log)
	stdlog.Print("from the standard library")
	platform.Logger(context.Background()).Info("outside a request")
	restore()
	stdlog.Print("after restore")

	var got []string
	for _, e := range logs.Entries(t) {
		got = append(got, fmt.Sprint(e["severity"], " ", e["message"]))
	}
	want := []string{"WARNING from the standard library", "INFO outside a request"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("entries mismatch (-want +got):\n%s", diff)
	}
}
