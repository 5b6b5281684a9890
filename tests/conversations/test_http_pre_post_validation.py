"""Save-time checks of httpcalls preRequest/postResponse: what runs is accepted, everything else is a 400."""

from __future__ import annotations

from typing import Any

import pytest

from common.field_errors import FieldError
from conversations.agent_document import validate_agent_document
from conversations.models import Agent
from harnesses.factories import account_bot

CALL = "workflows[0].tasks[0].calls[0]"


def document(**call: Any) -> dict[str, Any]:
    declared = {"name": "createJob", "request": {"method": "POST", "path": "/jobs"}, **call}
    return {
        "name": "bot",
        "workflows": [
            {
                "id": "main",
                "tasks": [
                    {
                        "id": "api",
                        "type": "httpcalls",
                        "targetServerUrl": "https://api.example.com",
                        "calls": [declared],
                    }
                ],
            }
        ],
    }


def errors(**call: Any) -> list[FieldError]:
    return validate_agent_document(document(**call)).errors


def only_error(**call: Any) -> FieldError:
    found = errors(**call)
    assert len(found) == 1, found
    return found[0]


def test_every_field_that_runs_is_accepted() -> None:
    assert (
        errors(
            preRequest={
                "delayBeforeExecutingInMillis": 250,
                "propertyInstructions": [
                    {"name": "ref", "valueString": "{memory.current.input}", "scope": "step"},
                    {"name": "profile", "fromObjectPath": "properties.profile", "convertToObject": True},
                ],
            },
            postResponse={
                "retryApiCallInstruction": {
                    "maxRetries": 10,
                    "exponentialBackoffDelayInMillis": 0,
                    "maxBackoffDelayInMillis": 10000,
                    "retryOnHttpCodes": [429, 502, 503],
                    "responseValuePathMatchers": [
                        {
                            "valuePath": "memory.current.createJob.body.items[0].state",
                            "equals": "pending",
                            "contains": "pend",
                            "trueIfNoMatch": False,
                        }
                    ],
                },
                "propertyInstructions": [
                    {
                        "name": "jobId",
                        "fromObjectPath": "memory.current.createJob.body.id",
                        "scope": "conversation",
                        "httpCodeValidator": {"runOnHttpCode": [200, 201, 202], "skipOnHttpCode": [0]},
                    }
                ],
            },
        )
        == []
    )
    assert errors(preRequest={}, postResponse={"retryApiCallInstruction": {}}) == []


def test_unknown_pre_request_or_post_response_field_is_refused_at_save(admin_client) -> None:
    doc = account_bot()
    doc["workflows"][0]["tasks"].insert(
        1,
        {
            "id": "jobs",
            "type": "httpcalls",
            "targetServerUrl": "https://api.example.com",
            "calls": [
                {
                    "name": "createJob",
                    "actions": ["confirm_deletion"],
                    "request": {"path": "/jobs"},
                    "preRequest": {"propertyInstuctions": []},
                    "postResponse": {"retryApiCallInstruction": {"maxRetrys": 5}, "saveResponse": True},
                }
            ],
        },
    )
    response = admin_client.post("/agentstore/agents", doc, format="json")
    assert response.status_code == 400
    problem = response.json()
    assert {error["field"]: error["message"] for error in problem["errors"]} == {
        "workflows[0].tasks[1].calls[0].preRequest.propertyInstuctions": "'propertyInstuctions' is not a preRequest field (did you mean 'propertyInstructions'?)",
        "workflows[0].tasks[1].calls[0].postResponse.retryApiCallInstruction.maxRetrys": "'maxRetrys' is not a retryApiCallInstruction field (did you mean 'maxRetries'?)",
        "workflows[0].tasks[1].calls[0].postResponse.saveResponse": "'saveResponse' is not a postResponse field (allowed: propertyInstructions, retryApiCallInstruction)",
    }
    assert problem["detail"].startswith("workflows[0].tasks[1].calls[0].preRequest.propertyInstuctions: ")
    assert not Agent.objects.exists()


@pytest.mark.parametrize(
    ("field", "message"),
    [
        ("preRequest.batchRequests", "'batchRequests' is not supported"),
        ("postResponse.outputBuildInstructions", "'outputBuildInstructions' is not supported"),
        ("postResponse.qrBuildInstructions", "'qrBuildInstructions' is not supported"),
        (
            "postResponse.retryHttpCallInstruction",
            "'retryHttpCallInstruction' is the old name of 'retryApiCallInstruction'",
        ),
    ],
)
def test_reference_features_that_do_not_run_here_are_refused_with_the_reason(
    field: str, message: str
) -> None:
    part, key = field.split(".")
    error = only_error(**{part: {key: {}}})
    assert error.field == f"{CALL}.{field}"
    assert error.message.startswith(message)


@pytest.mark.parametrize(
    "key", ["toObjectPath", "override", "runOnValidationError", "valueObject", "visibility"]
)
def test_property_fields_the_reference_never_applies_are_refused(key: str) -> None:
    error = only_error(postResponse={"propertyInstructions": [{"name": "x", "valueString": "y", key: "z"}]})
    assert error.field == f"{CALL}.postResponse.propertyInstructions[0].{key}"
    assert "is not supported" in error.message


@pytest.mark.parametrize(
    ("retry", "field", "message"),
    [
        ({"maxRetries": 11}, "maxRetries", "must be an integer from 0 to 10, got 11"),
        ({"maxRetries": -1}, "maxRetries", "must be an integer from 0 to 10, got -1"),
        ({"maxRetries": "3"}, "maxRetries", "must be an integer from 0 to 10, got '3'"),
        ({"maxRetries": 2.5}, "maxRetries", "must be an integer from 0 to 10, got 2.5"),
        ({"maxRetries": True}, "maxRetries", "must be an integer from 0 to 10, got boolean"),
        (
            {"exponentialBackoffDelayInMillis": 10001},
            "exponentialBackoffDelayInMillis",
            "must be an integer from 0 to 10000, got 10001",
        ),
        (
            {"maxBackoffDelayInMillis": -5},
            "maxBackoffDelayInMillis",
            "must be an integer from 0 to 10000, got -5",
        ),
        ({"retryOnHttpCodes": 503}, "retryOnHttpCodes", "must be an array of HTTP status codes, got number"),
        (
            {"retryOnHttpCodes": [503, 99]},
            "retryOnHttpCodes[1]",
            "must be an integer from 100 to 599, got 99",
        ),
        ({"retryOnHttpCodes": [600]}, "retryOnHttpCodes[0]", "must be an integer from 100 to 599, got 600"),
        (
            {"retryOnHttpCodes": ["503"]},
            "retryOnHttpCodes[0]",
            "must be an integer from 100 to 599, got '503'",
        ),
        ({"responseValuePathMatchers": {}}, "responseValuePathMatchers", "must be an array, got object"),
        (
            {"responseValuePathMatchers": [None]},
            "responseValuePathMatchers[0]",
            "must be an object, got null",
        ),
        ({"responseValuePathMatchers": [{}]}, "responseValuePathMatchers[0].valuePath", "is required"),
        (
            {"responseValuePathMatchers": [{"valuePath": "body.state"}]},
            "responseValuePathMatchers[0].valuePath",
            "'body.state' must start with one of memory, properties, context, args",
        ),
        (
            {"responseValuePathMatchers": [{"valuePath": "memory..x"}]},
            "responseValuePathMatchers[0].valuePath",
            "'memory..x' is not a path such as memory.current.<call name>.body.items[0].id",
        ),
        (
            {"responseValuePathMatchers": [{"valuePath": "memory.x", "equals": 3}]},
            "responseValuePathMatchers[0].equals",
            "must be a string, got number",
        ),
        (
            {"responseValuePathMatchers": [{"valuePath": "memory.x", "trueIfNoMatch": "yes"}]},
            "responseValuePathMatchers[0].trueIfNoMatch",
            "must be true or false, got string",
        ),
        (
            {"responseValuePathMatchers": [{"valuePath": "memory.x", "equal": "a"}]},
            "responseValuePathMatchers[0].equal",
            "'equal' is not a responseValuePathMatchers field (did you mean 'equals'?)",
        ),
    ],
)
def test_a_retry_instruction_is_checked(retry: dict[str, Any], field: str, message: str) -> None:
    error = only_error(postResponse={"retryApiCallInstruction": retry})
    assert (error.field, error.message) == (f"{CALL}.postResponse.retryApiCallInstruction.{field}", message)


@pytest.mark.parametrize(
    ("instruction", "field", "message"),
    [
        ({"valueString": "x"}, "name", "is required"),
        (
            {"name": "{args.key}", "valueString": "x"},
            "name",
            "'{args.key}' may only contain A-Z a-z 0-9 _ - (a name is not a template)",
        ),
        ({"name": "a"}, "", "needs exactly one of 'valueString' (a template) and 'fromObjectPath' (a path)"),
        (
            {"name": "a", "valueString": "x", "fromObjectPath": "properties.b"},
            "",
            "needs exactly one of 'valueString' (a template) and 'fromObjectPath' (a path), not both",
        ),
        ({"name": "a", "valueString": 5}, "valueString", "must be a string, got number"),
        (
            {"name": "a", "valueString": "${vault:API_KEY}"},
            "valueString",
            "may not hold a secret reference: a secret is never written to conversation memory",
        ),
        (
            {"name": "a", "fromObjectPath": "response.id"},
            "fromObjectPath",
            "'response.id' must start with one of memory, properties, context, args",
        ),
        (
            {"name": "a", "valueString": "x", "scope": "longTerm"},
            "scope",
            "'longTerm' must be one of conversation, step",
        ),
        (
            {"name": "a", "valueString": "x", "convertToObject": "true"},
            "convertToObject",
            "must be true or false, got string",
        ),
        (
            {"name": "a", "valueString": "x", "httpCodeValidator": {"runOnHttpCode": [200]}},
            "httpCodeValidator",
            "is only meaningful in postResponse: a preRequest instruction runs before any response",
        ),
    ],
)
def test_a_pre_request_property_instruction_is_checked(
    instruction: dict[str, Any], field: str, message: str
) -> None:
    error = only_error(preRequest={"propertyInstructions": [instruction]})
    where = f"{CALL}.preRequest.propertyInstructions[0]"
    assert (error.field, error.message) == (f"{where}.{field}" if field else where, message)


@pytest.mark.parametrize(
    ("validator", "field", "message"),
    [
        ([200], "", "must be an object, got array"),
        ({"runOnHttpCode": [700]}, ".runOnHttpCode[0]", "must be an integer from 100 to 599, got 700"),
        ({"skipOnHttpCode": 0}, ".skipOnHttpCode", "must be an array of HTTP status codes, got number"),
        (
            {"runOnHttpCodes": [200]},
            ".runOnHttpCodes",
            "'runOnHttpCodes' is not a httpCodeValidator field (did you mean 'runOnHttpCode'?)",
        ),
    ],
)
def test_a_post_response_http_code_validator_is_checked(validator: object, field: str, message: str) -> None:
    error = only_error(
        postResponse={
            "propertyInstructions": [{"name": "a", "valueString": "x", "httpCodeValidator": validator}]
        }
    )
    where = f"{CALL}.postResponse.propertyInstructions[0].httpCodeValidator"
    assert (error.field, error.message) == (where + field, message)


@pytest.mark.parametrize(
    ("call", "field", "message"),
    [
        ({"preRequest": []}, "preRequest", "must be an object, got array"),
        ({"postResponse": "x"}, "postResponse", "must be an object, got string"),
        (
            {"preRequest": {"propertyInstructions": {}}},
            "preRequest.propertyInstructions",
            "must be an array, got object",
        ),
        (
            {"preRequest": {"delayBeforeExecutingInMillis": 20000}},
            "preRequest.delayBeforeExecutingInMillis",
            "must be an integer from 0 to 10000, got 20000",
        ),
        (
            {"fireAndForget": True, "postResponse": {}},
            "postResponse",
            "has no effect on a fireAndForget call: its response is never read",
        ),
    ],
)
def test_pre_request_and_post_response_shapes_are_checked(
    call: dict[str, Any], field: str, message: str
) -> None:
    error = only_error(**call)
    assert (error.field, error.message) == (f"{CALL}.{field}", message)


def test_a_fire_and_forget_call_may_still_set_properties_before_it_is_sent() -> None:
    assert (
        errors(fireAndForget=True, preRequest={"propertyInstructions": [{"name": "a", "valueString": "b"}]})
        == []
    )


def test_a_retry_that_could_wait_more_than_ten_seconds_in_all_is_refused() -> None:
    error = only_error(postResponse={"retryApiCallInstruction": {"maxRetries": 10}})
    assert error.field == f"{CALL}.postResponse.retryApiCallInstruction"
    assert error.message == (
        "would wait 75000 ms in all to make its 10 retries, but the waits of one call may total at most 10000 ms "
        "(delayBeforeExecutingInMillis included): with these delays at most 3 retries fit; lower maxRetries, "
        "exponentialBackoffDelayInMillis or maxBackoffDelayInMillis"
    )
    assert (
        errors(
            preRequest={"delayBeforeExecutingInMillis": 1000},
            postResponse={"retryApiCallInstruction": {"maxRetries": 4, "maxBackoffDelayInMillis": 3000}},
        )
        == []
    )
    assert fields_of(
        preRequest={"delayBeforeExecutingInMillis": 1001},
        postResponse={"retryApiCallInstruction": {"maxRetries": 4, "maxBackoffDelayInMillis": 3000}},
    ) == [f"{CALL}.postResponse.retryApiCallInstruction"]


def fields_of(**call: Any) -> list[str]:
    return [error.field for error in errors(**call)]


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("saveResponse", "is not needed: the response is always stored under memory.current.<call name>"),
        ("responseObjectName", "is not supported: the response is stored under memory.current.<call name>"),
        ("responseHeaderObjectName", "is not supported: response headers are not stored"),
        ("timeoutInMillis", "is not supported: every call uses HITL_HTTP_TIMEOUT_SECONDS"),
        ("isBatchCalls", "is not supported: batch calls do not run here"),
    ],
)
def test_reference_call_fields_that_do_nothing_here_are_refused(key: str, reason: str) -> None:
    error = only_error(**{key: "x"})
    assert (error.field, error.message) == (f"{CALL}.{key}", f"'{key}' {reason}")


def test_a_reference_request_content_type_is_refused_and_unknown_call_keys_are_warned_about() -> None:
    doc = document(
        request={"method": "POST", "path": "/jobs", "contentType": "text/xml", "timeout": 3}, retries=2
    )
    report = validate_agent_document(doc)
    assert [(error.field, error.message) for error in report.errors] == [
        (f"{CALL}.request.contentType", "'contentType' is not supported: set a Content-Type header")
    ]
    assert [warning.field for warning in report.warnings] == [f"{CALL}.retries", f"{CALL}.request.timeout"]
    assert all("is ignored" in warning.message for warning in report.warnings)
