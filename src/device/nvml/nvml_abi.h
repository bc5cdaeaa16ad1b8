// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Our own declaration of the subset of the NVML C ABI joule uses, so the build
// needs no NVIDIA headers. Layouts and values follow NVIDIA's public nvml.h.
// The loader (nvml_library.cc) only takes decltype() of these prototypes and
// resolves them with dlsym; the fake library (tests/fake_nvml) defines them.
#pragma once

extern "C" {

typedef int nvmlReturn_t;  // an enum in nvml.h; int-sized in the ABI
typedef struct nvmlDevice_st* nvmlDevice_t;

struct nvmlUtilization_t {
  unsigned int gpu;
  unsigned int memory;
};

struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

union nvmlValue_t {
  double dVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  long long sllVal;
  int siVal;
  unsigned short usVal;
};

// One entry of the driver's sample buffer (nvmlDeviceGetSamples).
struct nvmlSample_t {
  unsigned long long timeStamp;  // CPU wall-clock (CLOCK_REALTIME) microseconds
  nvmlValue_t sampleValue;
};

// What the _v3 process lists fill (nvmlProcessInfo_v2_t in nvml.h).
struct nvmlProcessInfo_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;  // kValueNotAvailable when the driver will not say
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

// One sample of nvmlDeviceGetProcessUtilization: a process's use of the GPU
// over the driver's sampling interval ending at timeStamp.
struct nvmlProcessUtilizationSample_t {
  unsigned int pid;
  unsigned long long timeStamp;  // CPU wall-clock microseconds
  unsigned int smUtil;           // percent
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
};

// nvmlDeviceGetPciInfo_v3 fills busId; busIdLegacy is the older, shorter form.
struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
};

struct nvmlFieldValue_t {
  unsigned int fieldId;
  unsigned int scopeId;
  long long timestamp;
  long long latencyUsec;
  int valueType;
  nvmlReturn_t nvmlReturn;
  nvmlValue_t value;
};

nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlShutdown(void);
const char* nvmlErrorString(nvmlReturn_t result);
nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length);
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length);
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci);
nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, unsigned int* arch);
nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long* energy_mj);
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* power_mw);
nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int count, nvmlFieldValue_t* values);
nvmlReturn_t nvmlDeviceGetSamples(nvmlDevice_t device, int type, unsigned long long lastSeenTimeStamp,
                                  int* sampleValType, unsigned int* sampleCount, nvmlSample_t* samples);
nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned int* limit_mw);
nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t device, unsigned int* min_mw,
                                                          unsigned int* max_mw);
nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t device, unsigned int* limit_mw);
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* utilization);
nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, int clock_type, unsigned int* clock_mhz);
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, int sensor, unsigned int* temp_c);
// The reasons the clocks are held where they are, a bit mask; the second name
// is the first's before driver 535 (drivers since export both).
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device, unsigned long long* reasons);
nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device, unsigned long long* reasons);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                     nvmlProcessInfo_t* infos);
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                      nvmlProcessInfo_t* infos);
// The samples after lastSeenTimeStamp; with utilization NULL, their count
// and NVML_ERROR_INSUFFICIENT_SIZE; none: NVML_ERROR_NOT_FOUND.
nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device, nvmlProcessUtilizationSample_t* utilization,
                                             unsigned int* processSamplesCount, unsigned long long lastSeenTimeStamp);
nvmlReturn_t nvmlDeviceSetPowerManagementLimit(nvmlDevice_t device, unsigned int limit_mw);
// Clock lists come highest first; with too small a buffer, the count needed
// and NVML_ERROR_INSUFFICIENT_SIZE.
nvmlReturn_t nvmlDeviceGetSupportedMemoryClocks(nvmlDevice_t device, unsigned int* count, unsigned int* clocks_mhz);
nvmlReturn_t nvmlDeviceGetSupportedGraphicsClocks(nvmlDevice_t device, unsigned int memory_mhz, unsigned int* count,
                                                  unsigned int* clocks_mhz);
nvmlReturn_t nvmlDeviceSetGpuLockedClocks(nvmlDevice_t device, unsigned int min_mhz, unsigned int max_mhz);
nvmlReturn_t nvmlDeviceResetGpuLockedClocks(nvmlDevice_t device);
nvmlReturn_t nvmlDeviceSetMemoryLockedClocks(nvmlDevice_t device, unsigned int min_mhz, unsigned int max_mhz);
nvmlReturn_t nvmlDeviceResetMemoryLockedClocks(nvmlDevice_t device);
nvmlReturn_t nvmlDeviceSetApplicationsClocks(nvmlDevice_t device, unsigned int memory_mhz, unsigned int graphics_mhz);
nvmlReturn_t nvmlDeviceResetApplicationsClocks(nvmlDevice_t device);

}  // extern "C"

namespace joule::nvml {

// Return codes (nvmlReturn_t values) joule distinguishes.
inline constexpr nvmlReturn_t kSuccess = 0;
inline constexpr nvmlReturn_t kErrorUninitialized = 1;
inline constexpr nvmlReturn_t kErrorInvalidArgument = 2;
inline constexpr nvmlReturn_t kErrorNotSupported = 3;
inline constexpr nvmlReturn_t kErrorNoPermission = 4;
inline constexpr nvmlReturn_t kErrorNotFound = 6;
inline constexpr nvmlReturn_t kErrorInsufficientSize = 7;
inline constexpr nvmlReturn_t kErrorDriverNotLoaded = 9;
inline constexpr nvmlReturn_t kErrorTimeout = 10;
inline constexpr nvmlReturn_t kErrorLibraryNotFound = 12;
inline constexpr nvmlReturn_t kErrorFunctionNotFound = 13;
inline constexpr nvmlReturn_t kErrorGpuIsLost = 15;
inline constexpr nvmlReturn_t kErrorResetRequired = 16;
inline constexpr nvmlReturn_t kErrorLibRmVersionMismatch = 18;
inline constexpr nvmlReturn_t kErrorUnknown = 999;

inline constexpr unsigned int kFieldPowerInstant = 186;  // NVML_FI_DEV_POWER_INSTANT, value in mW
inline constexpr int kTotalPowerSamples = 0;               // NVML_TOTAL_POWER_SAMPLES (mW)
inline constexpr int kValueTypeUnsignedInt = 1;           // NVML_VALUE_TYPE_UNSIGNED_INT
inline constexpr int kClockSm = 1;                       // NVML_CLOCK_SM
inline constexpr int kClockMem = 2;                      // NVML_CLOCK_MEM
inline constexpr int kTemperatureGpu = 0;                // NVML_TEMPERATURE_GPU
inline constexpr unsigned long long kClocksEventSwPowerCap = 0x4;  // nvmlClocksEventReasonSwPowerCap
inline constexpr unsigned int kArchitectureUnknown = 0xffffffff;
inline constexpr unsigned long long kValueNotAvailable = ~0ull;  // NVML_VALUE_NOT_AVAILABLE

// Buffer sizes from nvml.h (NVML_DEVICE_NAME_V2_BUFFER_SIZE, ...UUID_V2...).
inline constexpr unsigned int kNameBufferSize = 96;
inline constexpr unsigned int kUuidBufferSize = 96;
inline constexpr unsigned int kDriverVersionBufferSize = 80;

}  // namespace joule::nvml
