"""The pure core: functions over typed data. No I/O, no clock, no globals, no printing."""
