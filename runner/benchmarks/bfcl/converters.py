"""Java and JavaScript argument text converted to Python values, as BFCL's AST checker converts it.

Ports of ``java_type_converter`` and ``js_type_converter`` (``bfcl_eval/eval_checker/ast_eval/type_convertor/``,
``bfcl-eval`` 2026.3.23) and the type tables of ``bfcl_eval/constants/type_mappings.py``. Text that does not match
a type's pattern stays a string (so it then fails the value check rather than the type check), as there.
"""

from __future__ import annotations

import re
from typing import Any

JAVA_TYPE_CONVERSION: dict[str, type] = {
    "byte": int, "short": int, "integer": int, "float": float, "double": float, "long": int, "boolean": bool,
    "char": str, "Array": list, "ArrayList": list, "Set": set, "HashMap": dict, "Hashtable": dict,
    "Queue": list, "Stack": list, "String": str, "any": str,
}
JS_TYPE_CONVERSION: dict[str, type] = {
    "String": str, "integer": int, "float": float, "Bigint": int, "Boolean": bool, "dict": dict, "array": list,
    "any": str,
}


def java_type_converter(value: str, expected_type: str, nested_type: str | None = None) -> Any:
    """The Python value of Java text ``value`` of type ``expected_type`` (``java_type_converter``).

    Raises:
        ValueError: a type the table does not know.
        NotImplementedError: ``Set``, ``Hashtable``, ``Queue`` and ``Stack``, as in the original.
    """
    if expected_type not in JAVA_TYPE_CONVERSION:
        raise ValueError(f"Unsupported type: {expected_type}")
    if expected_type in ("byte", "short", "integer"):
        return int(value) if re.match(r"^-?\d+$", value) else str(value)
    if expected_type == "float":
        if not re.match(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?[fF]$", value):
            return str(value)
        return float(re.sub(r"[fF]$", "", value))
    if expected_type == "double":
        return float(value) if re.match(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?$", value) else str(value)
    if expected_type == "long":
        return int(re.sub(r"[lL]$", "", value)) if re.match(r"^-?\d+[lL]$", value) else str(value)
    if expected_type == "boolean":
        return value == "true" if value in ("true", "false") else str(value)
    if expected_type == "char":
        # The original's pattern (`^\'.$\'`) can never match, so a char always stays the text as written.
        return value if re.match(r"^\'.$\'", value) else str(value)
    if expected_type in ("Array", "ArrayList", "HashMap"):
        return _java_collection(value, expected_type, nested_type)
    if expected_type in ("Set", "Hashtable"):
        raise NotImplementedError("Set conversion is not implemented")
    if expected_type in ("Queue", "Stack"):
        raise NotImplementedError(f"{expected_type} conversion is not implemented")
    return str(value)


def _java_collection(text: str, type_name: str, nested_type: str | None) -> Any:
    if type_name == "ArrayList":
        return _java_arraylist(text, nested_type)
    if type_name == "Array":
        return _java_array(text, nested_type)
    return _java_hashmap(text)


def _java_element(text: str, nested_type: str | None) -> Any:
    if nested_type in ("char", "String"):
        return text[1:-1]
    return java_type_converter(text, nested_type) if nested_type else parse_java_value(text)


def _java_arraylist(text: str, nested_type: str | None) -> Any:
    as_list = re.search(r"new\s+ArrayList<\w*>\(Arrays\.asList\((.+?)\)\)", text)
    if as_list:
        return [_java_element(part.strip(), nested_type) for part in as_list.group(1).split(",")]
    adds = re.search(r"new\s+ArrayList<\w*>\(\)\s*\{\{\s*(.+?)\s*\}\}", text, re.DOTALL)
    if adds:
        return [_java_element(match.strip(), nested_type) for match in re.findall(r"add\((.+?)\)", adds.group(1))]
    if re.search(r"new\s+ArrayList<\w*>\(\)", text):
        return []
    return text


def _java_array(text: str, nested_type: str | None) -> Any:
    match = re.search(r"new\s+\w+\[\]\s*\{(.*?)\}", text)
    if not match:
        return text
    parts = [part.strip() for part in match.group(1).split(",") if part.strip()]
    if nested_type:
        return [java_type_converter(part, nested_type) for part in parts]
    return [parse_java_value(part) for part in parts]


def _java_hashmap(text: str) -> Any:
    match = re.search(r"new\s+HashMap<.*?>\s*\(\)\s*\{\s*\{?\s*(.*?)\s*\}?\s*\}", text, re.DOTALL)
    if match:
        elements: dict[str, Any] = {}
        puts = match.group(1)
        if puts.strip():
            for key, value in re.findall(r"put\(\"(.*?)\",\s*(.*?)\)", puts):
                elements[key] = parse_java_value(value.strip())
        return elements
    if re.search(r"new\s+HashMap<.*?>\s*\(\)", text):
        return {}
    return text


def parse_java_value(text: str) -> Any:
    """A Java literal without a declared type (``parse_java_value``): boolean, string, long, float, int, double,
    else the text."""
    if text == "true":
        return True
    if text == "false":
        return False
    if text.startswith('"') and text.endswith('"'):
        return text[1:-1]
    if re.match(r"^-?\d+[lL]$", text):
        return int(text[:-1])
    if re.match(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?[fF]$", text):
        return float(re.sub(r"[fF]$", "", text))
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def js_type_converter(value: str, expected_type: str, nested_type: str | None = None) -> Any:
    """The Python value of JavaScript text ``value`` of type ``expected_type`` (``js_type_converter``).

    Raises:
        ValueError: a type the table does not know.
    """
    if expected_type not in JS_TYPE_CONVERSION:
        raise ValueError(f"Unsupported type: {expected_type}")
    if expected_type == "String":
        quoted = (value.startswith('"') and value.endswith('"')) or (value.startswith("'") and value.endswith("'"))
        return value[1:-1] if quoted else str(value)
    if expected_type == "integer":
        return int(value) if re.match(r"^-?\d+$", value) else str(value)
    if expected_type == "float":
        return float(value) if re.match(r"^-?\d+(\.\d+)?$", value) else str(value)
    if expected_type == "Bigint":
        return int(value[:-1]) if re.match(r"^-?\d+n$", value) else str(value)
    if expected_type == "Boolean":
        return value == "true" if value in ("true", "false") else str(value)
    if expected_type in ("dict", "array"):
        return _js_collection(value, expected_type, nested_type)
    return str(value)


def _js_collection(code: str, type_name: str, nested_type: str | None = None) -> Any:
    code = code.strip()
    if type_name == "array":
        array_2d = r"\[\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\]|\bnew\s+Array\(\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\)"
        array_1d = r"\[(.*?)\]|\bnew\s+Array\((.*?)\)"
        try:
            match_2d = re.match(array_2d, code)
            if match_2d:
                elements = []
                for index, inner in enumerate(re.findall(r"\[(.*?)\]", match_2d.group(0))):
                    inner = inner.strip()
                    if index == 0 and inner.startswith("["):
                        inner = inner[1:]
                    elements.append([parse_js_value(e.strip()) for e in inner.split(",")])
                return elements
            match = re.match(array_1d, code)
            if not match:
                return code
            if match.group(1) is not None:
                body = match.group(1).strip()
            elif match.group(2) is not None:
                body = match.group(2).strip()
            else:
                body = ""
            parts = body.split(",") if body else []
            if nested_type:
                # The original passes "String" as the nested type of a quoted element; it is not used.
                return [js_type_converter(e.strip(), nested_type, "String")
                        if (e.strip().startswith("'") or e.strip().startswith('"'))
                        else js_type_converter(e.strip(), nested_type) for e in parts]
            return [parse_js_value(e.strip()) for e in parts]
        except Exception:  # noqa: BLE001 - the original's bare except: any failure leaves the text
            return code
    if code == "{}":
        return {}
    match = re.match(r"\{(.*?)\}", code)
    if not match:
        return code
    try:
        dictionary: dict[str, Any] = {}
        for key, value in re.findall(r"([^:]+):\s*(.*?)(?:,\s*(?=[^,]+:)|$)", match.group(1)):
            key = key.strip().strip("'\"")
            value = value.strip()
            if value.startswith("[") and value.endswith("]"):
                dictionary[key] = _js_collection(value, "array")
            elif value.startswith("{") and value.endswith("}"):
                dictionary[key] = _js_collection(value, "dict")
            else:
                dictionary[key] = parse_js_value(value.strip("'\""))
        return dictionary
    except Exception:  # noqa: BLE001 - the original catches everything and keeps the text
        return code


def parse_js_value(text: str) -> Any:
    """A JavaScript literal without a declared type (``parse_js_value``)."""
    text = text.strip()
    if text == "true":
        return True
    if text == "false":
        return False
    if (text.startswith('"') and text.endswith('"')) or (text.startswith("'") and text.endswith("'")):
        return text[1:-1]
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text
