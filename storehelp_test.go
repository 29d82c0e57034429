package main

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

// openTestStore opens a SQLite store of tb's own, closed at its end, and
// a context that bounds the test's store calls (60 s).
func openTestStore(tb testing.TB) (context.Context, *store.Store) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	tb.Cleanup(cancel)
	st, err := store.Open(ctx, store.Config{Path: filepath.Join(tb.TempDir(), "rk.db")})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	return ctx, st
}

// storeRestartTable stores n rules of e2e's BenchmarkRestart shape (a
// /32 destination, UDP port 53, discard; an hour's TTL), 5,000 a batch.
func storeRestartTable(tb testing.TB, ctx context.Context, st *store.Store, n int, actor string) {
	tb.Helper()
	exp := time.Now().Add(time.Hour)
	for i := 0; i < n; i += 5000 {
		in := make([]store.Input, 0, 5000)
		for j := i; j < min(i+5000, n); j++ {
			r, err := flowspec.Parse(fmt.Sprintf("match destination 10.%d.%d.%d/32 protocol ==17 destination-port ==53 then discard", j>>16&255, j>>8&255, j&255))
			if err != nil {
				tb.Fatal(err)
			}
			in = append(in, store.Input{Rule: r, ExpiresAt: exp, Actor: actor})
		}
		if _, err := st.UpsertMany(ctx, in); err != nil {
			tb.Fatal(err)
		}
	}
}
