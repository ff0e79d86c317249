// Command clientgo drives the simulator with tikv/client-go, TiDB's own TiKV client, at its
// default settings (batched RPCs, PD's etcd safepoint checker), so the sim is tested by a client
// nobody here wrote (docs/wire.md §14, §15). Built by tests/clients/test_client_go.py.
//
//	clientgo write PD TABLE_ID  writes transactions of every kind TiDB uses into the table's rows
//	clientgo read PD TABLE_ID   prints a snapshot of the table's rows: "ts", then "hexkey hexvalue"
package main

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/tikv/client-go/v2/txnkv"
)

// recordKey is TiDB's row key: 't' + int64(table) + "_r" + int64(handle), ints big-endian with the
// sign bit flipped (pingcap/tidb tablecodec.EncodeRowKeyWithHandle).
func recordKey(table, handle int64) []byte {
	key := []byte{'t'}
	key = binary.BigEndian.AppendUint64(key, uint64(table)^(1<<63))
	key = append(key, '_', 'r')
	return binary.BigEndian.AppendUint64(key, uint64(handle)^(1<<63))
}

type txnKind struct {
	name                            string
	pessimistic, asyncCommit, onePC bool
}

func fail(what string, err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
	os.Exit(1)
}

func write(ctx context.Context, client *txnkv.Client, table int64) {
	kinds := []txnKind{
		{"optimistic 2PC", false, false, false},
		{"optimistic async commit", false, true, false},
		{"optimistic 1PC", false, true, true},
		{"pessimistic 2PC", true, false, false},
		{"pessimistic async commit", true, true, false},
		{"pessimistic 1PC", true, true, true},
	}
	for round := 0; round < 3; round++ {
		for i, kind := range kinds {
			txn, err := client.Begin()
			if err != nil {
				fail("begin", err)
			}
			txn.SetPessimistic(kind.pessimistic)
			txn.SetEnableAsyncCommit(kind.asyncCommit)
			txn.SetEnable1PC(kind.onePC)
			base := int64(i * 10)
			keys := [][]byte{recordKey(table, base+1), recordKey(table, base+2), recordKey(table, base+3)}
			if kind.pessimistic {
				if err := txn.LockKeysWithWaitTime(ctx, 1000, keys...); err != nil {
					fail(kind.name+": lock", err)
				}
			}
			for j, key := range keys {
				if round == 2 && j == 1 {
					err = txn.Delete(key)
				} else {
					err = txn.Set(key, []byte(fmt.Sprintf("%s/round%d/%d", kind.name, round, j)))
				}
				if err != nil {
					fail(kind.name+": mutate", err)
				}
			}
			if err := txn.Commit(ctx); err != nil {
				fail(kind.name+": commit", err)
			}
			fmt.Printf("committed %s start_ts=%d\n", kind.name, txn.StartTS())
		}
	}
}

func read(ctx context.Context, client *txnkv.Client, table int64) {
	ts, err := client.GetTimestamp(ctx)
	if err != nil {
		fail("timestamp", err)
	}
	iter, err := client.GetSnapshot(ts).Iter(recordKey(table, -1<<63), recordKey(table+1, -1<<63))
	if err != nil {
		fail("iter", err)
	}
	defer iter.Close()
	fmt.Println(ts)
	for iter.Valid() {
		fmt.Printf("%s %s\n", hex.EncodeToString(iter.Key()), hex.EncodeToString(iter.Value()))
		if err := iter.Next(); err != nil {
			fail("next", err)
		}
	}
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: clientgo write|read PD_ADDRESS TABLE_ID")
		os.Exit(2)
	}
	table, err := strconv.ParseInt(os.Args[3], 10, 64)
	if err != nil {
		fmt.Fprintf(os.Stderr, "clientgo: table id %q is not an integer\n", os.Args[3])
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	client, err := txnkv.NewClient([]string{os.Args[2]})
	if err != nil {
		fail("connect", err)
	}
	defer client.Close()
	switch os.Args[1] {
	case "write":
		write(ctx, client, table)
	case "read":
		read(ctx, client, table)
	default:
		fmt.Fprintf(os.Stderr, "clientgo: unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
}
