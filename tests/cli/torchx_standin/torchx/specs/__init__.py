from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Dict, List, Optional, Union


class RetryPolicy(str, Enum):
    REPLICA = "REPLICA"
    APPLICATION = "APPLICATION"
    ROLE = "ROLE"


class macros:
    img_root = "${img_root}"
    app_id = "${app_id}"
    replica_id = "${replica_id}"
    rank0_env = "${rank0_env}"


@dataclass
class Resource:
    cpu: int
    gpu: int
    memMB: int
    capabilities: Dict[str, Any] = field(default_factory=dict)
    devices: Dict[str, int] = field(default_factory=dict)
    tags: Dict[str, object] = field(default_factory=dict)


NULL_RESOURCE = Resource(cpu=-1, gpu=-1, memMB=-1)


@dataclass
class BindMount:
    src_path: str
    dst_path: str
    read_only: bool = False


@dataclass
class VolumeMount:
    src: str
    dst_path: str
    read_only: bool = False


@dataclass
class DeviceMount:
    src_path: str
    dst_path: str
    permissions: str = "rwm"


@dataclass
class Role:
    name: str
    image: str
    min_replicas: Optional[int] = None
    base_image: Optional[str] = None
    entrypoint: str = ""
    args: List[str] = field(default_factory=list)
    env: Dict[str, str] = field(default_factory=dict)
    num_replicas: int = 1
    max_retries: int = 0
    retry_policy: RetryPolicy = RetryPolicy.APPLICATION
    resource: Resource = field(default_factory=lambda: Resource(-1, -1, -1))
    port_map: Dict[str, int] = field(default_factory=dict)
    metadata: Dict[str, Any] = field(default_factory=dict)
    mounts: List[Union[BindMount, VolumeMount, DeviceMount]] = field(default_factory=list)


@dataclass
class AppDef:
    name: str
    roles: List[Role] = field(default_factory=list)
    metadata: Dict[str, str] = field(default_factory=dict)
