/* A fake NVIDIA NVML (libnvidia-ml.so.1) for air's GPU metrics tests on machines without a GPU:
 * the functions air's agent calls (src/agent/nvml_reader.cc), with NVML's real signatures and
 * struct layouts as nvml.h declares them (NVML API 12/13), reporting fixed values per device:
 *   utilization 40 + i %, memory used (i + 1) * 10^9 of 80 * 10^9 bytes, power 150000 + 1000 i mW
 *   of an enforced limit of 700000 mW, temperature 50 + i C.
 * FAKE_NVML_COUNT sets the device count (default 2); FAKE_NVML_INIT_ERROR makes nvmlInit_v2
 * return that NVML error code (9: NVML_ERROR_DRIVER_NOT_LOADED), FAKE_NVML_POWER_ERROR
 * nvmlDeviceGetPowerUsage (15: NVML_ERROR_GPU_IS_LOST), FAKE_NVML_TEMPERATURE_ERROR
 * nvmlDeviceGetTemperature (3: NVML_ERROR_NOT_SUPPORTED).
 * Built by tests/python/test_system_metrics.py with the system's cc. */
#include <stdlib.h>
#include <string.h>

typedef enum nvmlReturn_enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;

typedef struct nvmlDevice_st* nvmlDevice_t;

typedef struct nvmlUtilization_st {
  unsigned int gpu;
  unsigned int memory;
} nvmlUtilization_t;

typedef struct nvmlMemory_st {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

typedef enum nvmlTemperatureSensors_enum { NVML_TEMPERATURE_GPU = 0 } nvmlTemperatureSensors_t;

struct nvmlDevice_st {
  unsigned int index;
};

static struct nvmlDevice_st devices[16];
static int initialized = 0;

/* The error code an FAKE_NVML_<CALL>_ERROR variable asks for, else NVML_SUCCESS. */
static nvmlReturn_t injected(const char* variable) {
  const char* error = getenv(variable);
  return error ? (nvmlReturn_t)atoi(error) : NVML_SUCCESS;
}

static unsigned int device_count(void) {
  const char* count = getenv("FAKE_NVML_COUNT");
  unsigned int n = count ? (unsigned int)atoi(count) : 2;
  return n > 16 ? 16 : n;
}

nvmlReturn_t nvmlInit_v2(void) {
  if (injected("FAKE_NVML_INIT_ERROR") != NVML_SUCCESS) return injected("FAKE_NVML_INIT_ERROR");
  for (unsigned int i = 0; i < 16; ++i) devices[i].index = i;
  initialized = 1;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown(void) {
  initialized = 0;
  return NVML_SUCCESS;
}

const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    default: return "Unknown Error";
  }
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* deviceCount) {
  if (!initialized) return NVML_ERROR_UNINITIALIZED;
  *deviceCount = device_count();
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (!initialized) return NVML_ERROR_UNINITIALIZED;
  if (index >= device_count()) return NVML_ERROR_INVALID_ARGUMENT;
  *device = &devices[index];
  return NVML_SUCCESS;
}

/* UUIDs "GPU-fake-<index>". */
nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  if (!initialized) return NVML_ERROR_UNINITIALIZED;
  if (strncmp(uuid, "GPU-fake-", 9) != 0) return NVML_ERROR_NOT_FOUND;
  return nvmlDeviceGetHandleByIndex_v2((unsigned int)atoi(uuid + 9), device);
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* utilization) {
  utilization->gpu = 40 + device->index;
  utilization->memory = 10;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  memory->total = 80000000000ULL;
  memory->used = (device->index + 1) * 1000000000ULL;
  memory->free = memory->total - memory->used;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* power) {
  if (injected("FAKE_NVML_POWER_ERROR") != NVML_SUCCESS) return injected("FAKE_NVML_POWER_ERROR");
  *power = 150000 + 1000 * device->index;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int* limit) {
  (void)device;
  *limit = 700000;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType,
                                      unsigned int* temp) {
  if (sensorType != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
  if (injected("FAKE_NVML_TEMPERATURE_ERROR") != NVML_SUCCESS) {
    return injected("FAKE_NVML_TEMPERATURE_ERROR");
  }
  *temp = 50 + device->index;
  return NVML_SUCCESS;
}
