// Tests of reading request/graph files: JSON and binary, chosen by extension
// or content, stdin, and errors that name the file.
#include "client/cli/message_io.h"

#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "partplan/v1/planner_service.pb.h"

namespace partplan {
namespace cli {
namespace {

using ::testing::HasSubstr;

constexpr char kValidateJson[] = R"json(
  {"graph": {"name": "g", "nodes": [
    {"name": "x", "op": "PLACEHOLDER", "target": "x"},
    {"name": "output", "op": "OUTPUT", "target": "output",
     "args": [{"node": "x"}]}]},
   "devices": {"devices": [{"name": "gpu0", "availableMemoryBytes": "1024"}]}}
)json";

// A file under the test's scratch directory holding `contents`.
std::string WriteTempFile(const std::string& name,
                          const std::string& contents) {
  const char* directory = std::getenv("TEST_TMPDIR");
  const std::string path =
      absl::StrCat(directory != nullptr ? directory : "/tmp", "/", name);
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

v1::ValidateRequest ExpectedRequest() {
  v1::ValidateRequest request;
  EXPECT_TRUE(ParseMessage(kValidateJson, "expected.json", &request).ok());
  return request;
}

TEST(ReadMessageFileTest, ReadsJsonByExtension) {
  const std::string path = WriteTempFile("request.json", kValidateJson);
  std::istringstream no_stdin;
  v1::ValidateRequest request;
  ASSERT_TRUE(ReadMessageFile(path, no_stdin, &request).ok());
  EXPECT_EQ(request.graph().name(), "g");
  EXPECT_EQ(request.graph().nodes_size(), 2);
  EXPECT_EQ(request.graph().nodes(1).op(), v1::OUTPUT);
  EXPECT_EQ(request.devices().devices(0).available_memory_bytes(), 1024);
}

TEST(ReadMessageFileTest, ReadsBinaryByExtensionOrContent) {
  const std::string binary = ExpectedRequest().SerializeAsString();
  for (const char* name : {"request.pb", "request.bin", "request"}) {
    const std::string path = WriteTempFile(name, binary);
    std::istringstream no_stdin;
    v1::ValidateRequest request;
    const absl::Status status = ReadMessageFile(path, no_stdin, &request);
    ASSERT_TRUE(status.ok()) << name << ": " << status;
    EXPECT_EQ(request.SerializeAsString(), binary) << name;
  }
}

TEST(ReadMessageFileTest, SniffsJsonWithoutAnExtension) {
  const std::string path = WriteTempFile("request_without_extension",
                                         absl::StrCat("\n\t ", kValidateJson));
  std::istringstream no_stdin;
  v1::ValidateRequest request;
  ASSERT_TRUE(ReadMessageFile(path, no_stdin, &request).ok());
  EXPECT_EQ(request.graph().name(), "g");
}

TEST(ReadMessageFileTest, DashReadsStdin) {
  std::istringstream json_stdin(kValidateJson);
  v1::ValidateRequest request;
  ASSERT_TRUE(ReadMessageFile("-", json_stdin, &request).ok());
  EXPECT_EQ(request.graph().name(), "g");

  std::istringstream binary_stdin(ExpectedRequest().SerializeAsString());
  v1::ValidateRequest from_binary;
  ASSERT_TRUE(ReadMessageFile("-", binary_stdin, &from_binary).ok());
  EXPECT_EQ(from_binary.graph().name(), "g");
}

TEST(ReadMessageFileTest, MissingFileIsNotFoundNamingIt) {
  std::istringstream no_stdin;
  v1::ValidateRequest request;
  const absl::Status status =
      ReadMessageFile("/nonexistent/request.json", no_stdin, &request);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("cannot read '/nonexistent/request.json'"));
}

TEST(ReadMessageFileTest, DirectoryIsAnErrorNamingIt) {
  std::istringstream no_stdin;
  v1::ValidateRequest request;
  const char* directory = std::getenv("TEST_TMPDIR");
  ASSERT_NE(directory, nullptr);
  const absl::Status status = ReadMessageFile(directory, no_stdin, &request);
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()), HasSubstr(directory));
}

TEST(ReadMessageFileTest, BadContentsNameFileAndType) {
  struct BadFile {
    std::string name;
    std::string contents;
    std::string expected_message;
  };
  const BadFile cases[] = {
      {"truncated.json", R"({"graph": {"nodes": [)",
       "not a valid JSON partplan.v1.ValidateRequest"},
      {"unknown_field.json", R"({"graph": {"nodez": []}})",
       "not a valid JSON partplan.v1.ValidateRequest"},
      {"bad_enum.json", R"({"graph": {"nodes": [{"op": "JUMP"}]}})",
       "not a valid JSON partplan.v1.ValidateRequest"},
      {"garbage.pb", "\xff\xff\xff\xff",
       "not a valid binary partplan.v1.ValidateRequest"},
  };
  for (const BadFile& c : cases) {
    const std::string path = WriteTempFile(c.name, c.contents);
    std::istringstream no_stdin;
    v1::ValidateRequest request;
    const absl::Status status = ReadMessageFile(path, no_stdin, &request);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_THAT(std::string(status.message()), HasSubstr(path));
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.expected_message));
  }
}

TEST(ReadMessageFileTest, EmptyPathIsAnError) {
  std::istringstream no_stdin;
  v1::ValidateRequest request;
  EXPECT_EQ(ReadMessageFile("", no_stdin, &request).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MessageToPrettyJsonTest, PrintsProto3JsonThatParsesBack) {
  const v1::ValidateRequest request = ExpectedRequest();
  const std::string json = MessageToPrettyJson(request);
  EXPECT_THAT(json, HasSubstr("\"availableMemoryBytes\": \"1024\""));
  EXPECT_THAT(json, HasSubstr("\"op\": \"PLACEHOLDER\""));
  EXPECT_EQ(json.back(), '\n');
  v1::ValidateRequest parsed;
  ASSERT_TRUE(ParseMessage(json, "printed.json", &parsed).ok());
  EXPECT_EQ(parsed.SerializeAsString(), request.SerializeAsString());
}

TEST(NewMessageTest, MakesAnEmptyMessageOfTheType) {
  std::unique_ptr<google::protobuf::Message> message =
      NewMessage(v1::PlanRequest::descriptor());
  EXPECT_EQ(message->GetDescriptor(), v1::PlanRequest::descriptor());
  EXPECT_EQ(message->ByteSizeLong(), 0u);
}

}  // namespace
}  // namespace cli
}  // namespace partplan
