package dao_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"cloud.google.com/go/spanner"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spanmart/spanmart/gen/dao"
)

// failingReader fails every ReadRow with err. (The reads that succeed are run against the emulator
// through every generated table in gen/dao/daotest.)
type failingReader struct {
	dao.Reader
	err error
}

func (f failingReader) ReadRow(context.Context, string, spanner.Key, []string) (*spanner.Row, error) {
	return nil, f.err
}

type row struct {
	Id string `spanner:"Id"`
}

func TestReadRowErrors(t *testing.T) {
	ctx := context.Background()
	_, err := dao.ReadRow[row](ctx, failingReader{err: status.Error(codes.NotFound, "row not found")}, "T", spanner.Key{"a"}, []string{"Id"}, "Thing")
	if !errors.Is(err, dao.ErrNotFound) || !strings.Contains(err.Error(), `read Thing ("a")`) {
		t.Errorf("missing row: %v, want dao.ErrNotFound naming the row", err)
	}
	unavailable := status.Error(codes.Unavailable, "try again")
	_, err = dao.ReadRow[row](ctx, failingReader{err: unavailable}, "T", spanner.Key{"a"}, []string{"Id"}, "Thing")
	if errors.Is(err, dao.ErrNotFound) || spanner.ErrCode(err) != codes.Unavailable {
		t.Errorf("other error: %v, want it wrapped with its code", err)
	}
}
