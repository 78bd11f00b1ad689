#include "planner/graph/devices.h"

#include <functional>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/base/status_util.h"
#include "tests/planner/test_graphs.h"

namespace partplan {
namespace {

using ::testing::HasSubstr;

TEST(ImportDevicesTest, KeepsOrderAndIndexesLogicalIds) {
  v1::DeviceInventory inventory = TestDevices({300, 100, 200});
  inventory.mutable_devices(0)->set_logical_id(7);
  inventory.set_transfer_rate_bytes_per_second(1e9);
  absl::StatusOr<DeviceList> devices = ImportDevices(inventory, InputLimits());
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 3);
  EXPECT_EQ((*devices)[0].available_memory_bytes, 300);
  EXPECT_EQ(devices->IndexOf(7), 0);
  EXPECT_EQ(devices->IndexOf(2), 2);
  EXPECT_EQ(devices->IndexOf(0), -1);
  EXPECT_EQ(devices->transfer_rate_bytes_per_second(), 1e9);
}

TEST(ImportDevicesTest, AcceptsAConsistentMesh) {
  v1::DeviceInventory inventory = TestDevices({1, 1, 1, 1, 1, 1});
  inventory.add_mesh_shape(2);
  inventory.add_mesh_shape(3);
  inventory.add_mesh_axis_names("dp");
  inventory.add_mesh_axis_names("tp");
  EXPECT_TRUE(ImportDevices(inventory, InputLimits()).ok());
}

struct BadInventoryCase {
  std::string name;
  std::function<void(v1::DeviceInventory&)> corrupt;
  std::string field;
  std::string message;
};

class BadInventoryTest : public ::testing::TestWithParam<BadInventoryCase> {};

TEST_P(BadInventoryTest, IsInvalidArgumentNamingTheField) {
  v1::DeviceInventory inventory = TestDevices({100, 200, 300, 400});
  GetParam().corrupt(inventory);
  InputLimits limits;
  limits.max_devices = 4;
  absl::StatusOr<DeviceList> devices = ImportDevices(inventory, limits);
  ASSERT_FALSE(devices.ok());
  EXPECT_EQ(devices.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(InvalidFieldPath(devices.status()).value_or("<none>"), GetParam().field)
      << devices.status();
  EXPECT_THAT(std::string(devices.status().message()), HasSubstr(GetParam().message));
}

INSTANTIATE_TEST_SUITE_P(
    AllChecks, BadInventoryTest,
    ::testing::ValuesIn(std::vector<BadInventoryCase>{
        {"TooMany", [](v1::DeviceInventory& i) { *i.add_devices() = i.devices(0); },
         "devices.devices", "above the limit of 4 (--max_devices)"},
        {"NoName", [](v1::DeviceInventory& i) { i.mutable_devices(1)->clear_name(); },
         "devices.devices[1].name", "no name"},
        {"DuplicateName", [](v1::DeviceInventory& i) { i.mutable_devices(2)->set_name("dev0"); },
         "devices.devices[2].name", "duplicate device name 'dev0'"},
        {"DuplicateLogicalId",
         [](v1::DeviceInventory& i) { i.mutable_devices(3)->set_logical_id(1); },
         "devices.devices[3].logical_id", "duplicate logical id 1 (first used by devices[1])"},
        {"NegativeLogicalId",
         [](v1::DeviceInventory& i) { i.mutable_devices(0)->set_logical_id(-1); },
         "devices.devices[0].logical_id", "must not be negative"},
        {"ZeroMemory",
         [](v1::DeviceInventory& i) { i.mutable_devices(1)->set_available_memory_bytes(0); },
         "devices.devices[1].available_memory_bytes", "must have positive memory, got 0"},
        {"NegativeMemory",
         [](v1::DeviceInventory& i) { i.mutable_devices(1)->set_available_memory_bytes(-8); },
         "devices.devices[1].available_memory_bytes", "got -8"},
        {"NanThroughput",
         [](v1::DeviceInventory& i) {
           i.mutable_devices(0)->set_compute_flops_per_second(
               std::numeric_limits<double>::quiet_NaN());
         },
         "devices.devices[0].compute_flops_per_second", "finite"},
        {"NegativeBandwidth",
         [](v1::DeviceInventory& i) {
           i.mutable_devices(0)->set_memory_bandwidth_bytes_per_second(-1);
         },
         "devices.devices[0].memory_bandwidth_bytes_per_second", "not negative"},
        {"NegativeTransferRate",
         [](v1::DeviceInventory& i) { i.set_transfer_rate_bytes_per_second(-1); },
         "devices.transfer_rate_bytes_per_second", "not negative"},
        {"InfiniteTransferRate",
         [](v1::DeviceInventory& i) {
           i.set_transfer_rate_bytes_per_second(std::numeric_limits<double>::infinity());
         },
         "devices.transfer_rate_bytes_per_second", "finite"},
        {"LinkToUnknownDevice",
         [](v1::DeviceInventory& i) {
           v1::Link* link = i.add_links();
           link->set_logical_id_a(0);
           link->set_logical_id_b(9);
           link->set_bandwidth_bytes_per_second(1);
         },
         "devices.links[0].logical_id_b", "no device has logical id 9"},
        {"LinkToItself",
         [](v1::DeviceInventory& i) {
           v1::Link* link = i.add_links();
           link->set_logical_id_a(2);
           link->set_logical_id_b(2);
           link->set_bandwidth_bytes_per_second(1);
         },
         "devices.links[0]", "two different devices"},
        {"LinkWithoutBandwidth",
         [](v1::DeviceInventory& i) {
           v1::Link* link = i.add_links();
           link->set_logical_id_a(0);
           link->set_logical_id_b(1);
         },
         "devices.links[0].bandwidth_bytes_per_second", "positive"},
        {"MeshNotMultiplyingOut",
         [](v1::DeviceInventory& i) {
           i.add_mesh_shape(3);
           i.add_mesh_shape(2);
         },
         "devices.mesh_shape", "does not multiply out to the 4 devices"},
        {"MeshZeroAxis", [](v1::DeviceInventory& i) { i.add_mesh_shape(0); },
         "devices.mesh_shape[0]", "positive"},
        {"MeshAxisNamesMismatch",
         [](v1::DeviceInventory& i) {
           i.add_mesh_shape(4);
           i.add_mesh_axis_names("dp");
           i.add_mesh_axis_names("tp");
         },
         "devices.mesh_axis_names", "2 axis names for a mesh of 1 axes"},
        {"MeshAxisNamesDuplicate",
         [](v1::DeviceInventory& i) {
           i.add_mesh_shape(2);
           i.add_mesh_shape(2);
           i.add_mesh_axis_names("dp");
           i.add_mesh_axis_names("dp");
         },
         "devices.mesh_axis_names[1]", "unique"},
    }),
    [](const ::testing::TestParamInfo<BadInventoryCase>& info) { return info.param.name; });

}  // namespace
}  // namespace partplan
