"""verify scans the partitions whose rows the upstream still holds at the checkpoint
(tidelake.verify.verifier.ids_holding_rows): at a DROP PARTITION's barrier the dropped partition is
listed under dropping_definitions and its rows are intact, as in the replica."""

from tidelake.codec.schema import PartitionDefinition, PartitionInfo, TableInfo
from tidelake.verify.verifier import ids_holding_rows


def table(definitions, dropping=(), adding=()) -> TableInfo:
    part = PartitionInfo(type=1, definitions=[PartitionDefinition(i, f"p{i}") for i in definitions],
                         dropping_definitions=[PartitionDefinition(i, f"p{i}") for i in dropping],
                         adding_definitions=[PartitionDefinition(i, f"p{i}") for i in adding])
    return TableInfo(id=100, name="metrics", partition=part)


def test_a_public_table_is_its_definitions():
    assert ids_holding_rows(table([110, 111])) == [110, 111]


def test_at_a_drop_partitions_barrier_the_dropped_partition_still_holds_its_rows():
    assert ids_holding_rows(table([110], dropping=[111])) == [110, 111]


def test_a_reorganization_in_flight_is_read_as_listed():
    assert ids_holding_rows(table([110, 112], dropping=[111], adding=[112])) == [110, 112]


def test_an_unpartitioned_table_is_its_id():
    assert ids_holding_rows(TableInfo(id=100, name="t")) == [100]
