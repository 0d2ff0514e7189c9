"""One JAX cluster of several processes: one global mesh, the same maps.

With JAX's multi-process runtime every process runs the same script, sees
every device of the cluster in `jax.devices()` but holds data only on its
own (`jax.local_devices()`). Layout maps and plans are global and need
nothing new; what changes is around them: joining the cluster
(`cluster`), feeding each process its part of the batch, and reading a
value whose shards live in other processes (`global_arrays`). Each helper
also works in a single process, so one script runs unchanged on a laptop
and on a cluster.

The cluster is described by Keras's environment variables
(`KERAS_DISTRIBUTION_JOB_ADDRESSES`, `KERAS_DISTRIBUTION_NUM_PROCESSES`,
`KERAS_DISTRIBUTION_PROCESS_ID`), which `python -m
keras_nlp.multihost.launch` sets for local runs.
"""

from keras_nlp.multihost.cluster import ENV_ADDRESS
from keras_nlp.multihost.cluster import ENV_HEARTBEAT_TIMEOUT
from keras_nlp.multihost.cluster import ENV_INITIALIZATION_TIMEOUT
from keras_nlp.multihost.cluster import ENV_NUM_PROCESSES
from keras_nlp.multihost.cluster import ENV_PROCESS_ID
from keras_nlp.multihost.cluster import ENV_SHUTDOWN_TIMEOUT
from keras_nlp.multihost.cluster import ClusterError
from keras_nlp.multihost.cluster import barrier
from keras_nlp.multihost.cluster import initialize
from keras_nlp.multihost.cluster import is_main_process
from keras_nlp.multihost.cluster import process_count
from keras_nlp.multihost.cluster import process_index
from keras_nlp.multihost.cluster import set_random_seed
from keras_nlp.multihost.global_arrays import gather
from keras_nlp.multihost.global_arrays import global_device_mesh
from keras_nlp.multihost.global_arrays import make_global_batch
from keras_nlp.multihost.global_arrays import process_batch_slice

__all__ = [
    "ENV_ADDRESS",
    "ENV_HEARTBEAT_TIMEOUT",
    "ENV_INITIALIZATION_TIMEOUT",
    "ENV_NUM_PROCESSES",
    "ENV_PROCESS_ID",
    "ENV_SHUTDOWN_TIMEOUT",
    "ClusterError",
    "barrier",
    "gather",
    "global_device_mesh",
    "initialize",
    "is_main_process",
    "make_global_batch",
    "process_batch_slice",
    "process_count",
    "process_index",
    "set_random_seed",
]
