"""The line controller's side of the box: the verdict at the PLC in time, and the PLC's asks of the box.

`station` holds the facts a PLC sees (board present, trigger, last serial and verdict, reject, a sequence with
an acknowledge handshake, heartbeat, health, recipe) and the fail-safe rules (no verdict by the deadline, an
error: reject). It is told of each verdict the moment the line decides it, before and independent of the
results database. `opcua` serves those facts as an OPC UA server shaped after OPC 40100 (Machine Vision);
`modbus` as a documented Modbus TCP register map. Nothing here imports the engine or the results room.
"""
