"""The nemesis: seeded fault schedules against the simulator and the real puller, then an
independent check of what landed (`tidelake nemesis`).

It sits beside the product as a test harness: it drives the simulator (tidelake.sim), runs the
puller (tidelake.capture) and reads the lake with deltalake and pyarrow only, never through the
tidelake code it checks.
"""
