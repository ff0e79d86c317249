"""verify reads the physical ids whose rows a replica at the checkpoint was built from
(tidelake.verify.verifier.as_held): at a DROP PARTITION's barrier the dropped partition, listed
under dropping_definitions with its rows intact; while a REORGANIZE PARTITION / PARTITION BY is in
delete reorganization, the replaced partitions, not the new ones already listed in definitions."""

from tidelake.codec.schema import PartitionDefinition, PartitionInfo, TableInfo
from tidelake.merge.replica_schema import is_partitioned
from tidelake.verify.verifier import as_held


def table(definitions, dropping=(), adding=(), table_id=100) -> TableInfo:
    part = PartitionInfo(type=1, definitions=[PartitionDefinition(i, f"p{i}") for i in definitions],
                         dropping_definitions=[PartitionDefinition(i, f"p{i}") for i in dropping],
                         adding_definitions=[PartitionDefinition(i, f"p{i}") for i in adding])
    return TableInfo(id=table_id, name="metrics", partition=part)


def test_a_public_table_is_its_definitions():
    assert as_held(table([110, 111])).physical_ids() == [110, 111]


def test_at_a_drop_partitions_barrier_the_dropped_partition_still_holds_its_rows():
    assert as_held(table([110], dropping=[111])).physical_ids() == [110, 111]


def test_a_reorganization_before_its_copy_is_read_as_listed():
    """Delete only to write reorganization: definitions are still the old partitions."""
    assert as_held(table([110, 111], dropping=[111], adding=[112, 113])).physical_ids() == [110, 111]


def test_a_reorganization_in_delete_reorganization_is_read_from_the_replaced_partitions():
    assert as_held(table([110, 112, 113], dropping=[111], adding=[112, 113])).physical_ids() == [110, 111]


def test_a_first_partitioning_in_delete_reorganization_is_the_unpartitioned_table():
    info = as_held(table([112, 113], dropping=[100], adding=[112, 113]))
    assert info.physical_ids() == [100] and not is_partitioned(info)
    before_copy = as_held(table([100], dropping=[100], adding=[112, 113]))  # pFullTable, the table's own id
    assert before_copy.physical_ids() == [100] and not is_partitioned(before_copy)


def test_an_unpartitioned_table_is_its_id():
    assert as_held(TableInfo(id=100, name="t")).physical_ids() == [100]
