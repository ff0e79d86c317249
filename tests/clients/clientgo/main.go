// Command clientgo drives the simulator with tikv/client-go, TiDB's own TiKV client, at its
// default settings (batched RPCs, PD's etcd safepoint checker), so the sim is tested by a client
// nobody here wrote (docs/wire.md#what-other-tikv-clients-need-from-a-store, docs/wire.md#pds-etcd-kv). Built by tests/clients/test_client_go.py.
//
//	clientgo write PD TABLE_ID  writes transactions of every kind TiDB uses into the table's rows
//	                            (row values as TiDB writes them for tests/capture/tidb_writes.py's table)
//	clientgo read PD TABLE_ID   prints a snapshot of the table's rows: "ts", then "hexkey hexvalue"
//	clientgo etcd-create PD KEY VALUE  creates KEY in PD's etcd unless it exists, with etcd's own Go
//	                            client: prints "created REVISION" or "exists CREATE_REVISION VALUE"
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
	clientv3 "go.etcd.io/etcd/client/v3"
)

// recordKey is TiDB's row key: 't' + int64(table) + "_r" + int64(handle), ints big-endian with the
// sign bit flipped (pingcap/tidb tablecodec.EncodeRowKeyWithHandle).
func recordKey(table, handle int64) []byte {
	key := []byte{'t'}
	key = binary.BigEndian.AppendUint64(key, uint64(table)^(1<<63))
	key = append(key, '_', 'r')
	return binary.BigEndian.AppendUint64(key, uint64(handle)^(1<<63))
}

// The columns of tests/capture/tidb_writes.py's table (tests/codec/data/table_pk_is_handle.json) that
// TiDB stores in the row value: id is the int handle and lives only in the key.
const (
	colK     = 2 // K INT NOT NULL DEFAULT 0
	colC     = 3 // c CHAR(120) NOT NULL DEFAULT ''
	colFlags = 4 // flags BIT(3) NULL DEFAULT b'101'
)

// compactUint is rowcodec's encodeUint: little-endian in 1, 2, 4 or 8 bytes, the fewest that hold v
// (pingcap/tidb pkg/util/rowcodec/common.go; docs/encoding.md#value-bytes-per-column-type).
func compactUint(v uint64) []byte {
	switch {
	case v <= 0xff:
		return []byte{byte(v)}
	case v <= 0xffff:
		return binary.LittleEndian.AppendUint16(nil, uint16(v))
	case v <= 0xffffffff:
		return binary.LittleEndian.AppendUint32(nil, uint32(v))
	}
	return binary.LittleEndian.AppendUint64(nil, v)
}

// compactInt is rowcodec's encodeInt: the signed twin of compactUint (1 byte if v fits int8, ...).
func compactInt(v int64) []byte {
	switch {
	case v == int64(int8(v)):
		return []byte{byte(int8(v))}
	case v == int64(int16(v)):
		return binary.LittleEndian.AppendUint16(nil, uint16(int16(v)))
	case v == int64(int32(v)):
		return binary.LittleEndian.AppendUint32(nil, uint32(int32(v)))
	}
	return binary.LittleEndian.AppendUint64(nil, uint64(v))
}

// rowV2 is TiDB's row format v2 in its small form (every column id < 256, data under 64 KiB): 0x80, flags
// 0, u16 LE not-null and null counts, the not-null ids then the null ids (one byte each, ascending), a u16
// LE end offset per not-null value, then the values (pingcap/tidb pkg/util/rowcodec/row.go toBytes;
// docs/encoding.md#layout). values maps column id -> encoded value, nil for NULL.
func rowV2(values map[byte][]byte) []byte {
	var notNull, null []byte
	for id := 0; id < 256; id++ {
		if v, ok := values[byte(id)]; ok {
			if v == nil {
				null = append(null, byte(id))
			} else {
				notNull = append(notNull, byte(id))
			}
		}
	}
	row := []byte{0x80, 0}
	row = binary.LittleEndian.AppendUint16(row, uint16(len(notNull)))
	row = binary.LittleEndian.AppendUint16(row, uint16(len(null)))
	row = append(append(row, notNull...), null...)
	var data []byte
	for _, id := range notNull {
		data = append(data, values[id]...)
		row = binary.LittleEndian.AppendUint16(row, uint16(len(data)))
	}
	return append(row, data...)
}

// tableRow is the value TiDB writes for (K, c, flags); flags < 0 stands for NULL. A NULL flags is kept in
// the null list because the column has a default (tables.go CanSkip; docs/encoding.md#which-columns-the-writer-stores).
func tableRow(k int64, c string, flags int64) []byte {
	values := map[byte][]byte{colK: compactInt(k), colC: []byte(c), colFlags: nil}
	if flags >= 0 {
		values[colFlags] = compactUint(uint64(flags)) // BIT: its value as an unsigned int (docs/encoding.md#value-bytes-per-column-type)
	}
	return rowV2(values)
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
	// K (an INT) scaled per round: its compact encoding is 1, 2 and 4 bytes wide across the rows
	scale := []int64{-3, 300, 70000}
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
					handle := base + int64(j) + 1
					c := fmt.Sprintf("%s/round%d/%d", kind.name, round, j)
					err = txn.Set(key, tableRow(handle*scale[round], c, (handle+int64(round))%9-1))
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

// etcdCreate is clientv3's create-if-absent (a Txn: CreateRevision(key) = 0 → put, else get) on PD's
// client URL, where PD's embedded etcd serves it (docs/wire.md#pds-etcd-kv).
func etcdCreate(ctx context.Context, pd, key, value string) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{pd}, DialTimeout: 10 * time.Second})
	if err != nil {
		fail("etcd connect", err)
	}
	defer cli.Close()
	resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, value)).Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		fail("etcd txn", err)
	}
	if resp.Succeeded {
		fmt.Printf("created %d\n", resp.Header.Revision)
		return
	}
	kv := resp.Responses[0].GetResponseRange().Kvs[0]
	fmt.Printf("exists %d %s\n", kv.CreateRevision, kv.Value)
}

func main() {
	if len(os.Args) == 5 && os.Args[1] == "etcd-create" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		etcdCreate(ctx, os.Args[2], os.Args[3], os.Args[4])
		return
	}
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: clientgo write|read PD_ADDRESS TABLE_ID | etcd-create PD_ADDRESS KEY VALUE")
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
