"""The partplan.v1 messages and stubs, generated from proto/partplan/v1.

    from partplan.messages import Graph, DeviceInventory, PartitionerConfig
    # the same classes as partplan.v1.graph_pb2.Graph etc.
"""

from partplan.v1 import (device_pb2, graph_pb2, parallelize_pb2, plan_pb2, planner_service_pb2,
                         planner_service_pb2_grpc, training_pb2)

_MODULES = (graph_pb2, device_pb2, plan_pb2, training_pb2, parallelize_pb2, planner_service_pb2)

__all__ = []
for _module in _MODULES:
    for _name, _descriptor in _module.DESCRIPTOR.message_types_by_name.items():
        globals()[_name] = getattr(_module, _name)
        __all__.append(_name)
    for _name, _enum in _module.DESCRIPTOR.enum_types_by_name.items():
        globals()[_name] = getattr(_module, _name)
        __all__.append(_name)
        for _value in _enum.values:  # top-level enum values: PLACEHOLDER, OUTPUT, ...
            globals()[_value.name] = _value.number
            __all__.append(_value.name)
del _module, _name, _descriptor, _enum, _value

PartitionPlannerStub = planner_service_pb2_grpc.PartitionPlannerStub
PartitionPlannerServicer = planner_service_pb2_grpc.PartitionPlannerServicer
add_PartitionPlannerServicer_to_server = planner_service_pb2_grpc.add_PartitionPlannerServicer_to_server
SERVICE_NAME = "partplan.v1.PartitionPlanner"

__all__ += [
    "PartitionPlannerStub",
    "PartitionPlannerServicer",
    "add_PartitionPlannerServicer_to_server",
    "SERVICE_NAME",
]
